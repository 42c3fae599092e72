"""The one place where sizes are decided: quick (CI) or full (a learner's run).

Set ``MLM_COURSE_QUICK=1`` to shrink every size the notebooks and scripts read from :data:`SETTINGS`.
Notebooks never branch on the mode themselves; they read a field of ``SETTINGS``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

import torch

from mlm_course.precision import pick_device

QUICK_ENV_VAR = "MLM_COURSE_QUICK"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    """Sizes used across the course. ``full()`` and ``quick()`` are the two presets."""

    quick: bool
    # corpus
    max_chars: int | None  # slice of the pretraining text the notebooks use (None = all; mlm-course pretrain --max-chars)
    # 01_why_log
    gd_steps: int  # gradient-descent steps fitting a unigram model by minimising the NLL
    # 03_masking
    masking_rows: int  # sequences masked when measuring rates
    # 05_objective
    objective_steps: int  # training steps of each tiny model in the labels=input_ids bug experiment
    # 06_pretraining
    pretrain_steps: int  # the live run's schedule (TrainConfig.pretraining's 14,000 in full mode)
    pretrain_minutes: float | None  # the live run's time budget (None: its steps)
    pretrain_batch_size: int
    pretrain_seq_len: int
    # 07_fine_tuning
    finetune_steps: int
    finetune_train_examples: int | None
    finetune_eval_examples: int | None
    word_order_pairs: int | None  # word-order test pairs scored live by zero-shot PLL (None = all 300)
    # 08_ablations
    ablation_budget: str  # the budget of mlm_course.lab.ablation_grid.TRAINING_BUDGETS that notebook 08 re-runs live
    # 10_chinese_masking
    chinese_lines: int  # training lines masked when measuring rates and whole-word masks
    chinese_smoke_steps: int  # steps of the live smoke run of character-BERT pretraining

    @classmethod
    def full(cls) -> Settings:
        return cls(
            quick=False,
            max_chars=None,
            gd_steps=1500,
            masking_rows=10_000,
            objective_steps=200,
            pretrain_steps=14_000,
            pretrain_minutes=3.0,
            pretrain_batch_size=32,
            pretrain_seq_len=128,
            finetune_steps=300,
            finetune_train_examples=None,
            finetune_eval_examples=None,
            word_order_pairs=None,
            ablation_budget="cpu",
            chinese_lines=20_000,
            chinese_smoke_steps=30,
        )

    @classmethod
    def quick_mode(cls) -> Settings:
        return replace(
            cls.full(),
            quick=True,
            max_chars=400_000,
            gd_steps=300,
            masking_rows=2_000,
            objective_steps=20,
            pretrain_steps=12,
            pretrain_minutes=None,
            pretrain_batch_size=8,
            pretrain_seq_len=64,
            finetune_steps=12,
            finetune_train_examples=256,
            finetune_eval_examples=128,
            word_order_pairs=30,
            ablation_budget="quick",
            chinese_lines=2_000,
            chinese_smoke_steps=5,
        )

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Read ``MLM_COURSE_QUICK`` (1/true/yes/on or 0/false/no/off/unset)."""
        value = (os.environ if environ is None else environ).get(QUICK_ENV_VAR, "").strip().lower()
        if value in _TRUE:
            return cls.quick_mode()
        if value in _FALSE:
            return cls.full()
        raise ValueError(
            f"{QUICK_ENV_VAR}={value!r} is not understood: set it to 1 (quick, as in CI) or 0 / unset (full)."
        )

    def describe(self) -> str:
        """One line per size, for the top of a notebook."""
        mode = "quick (CI)" if self.quick else "full"
        rows = [f"{f.name} = {getattr(self, f.name)}" for f in fields(self) if f.name != "quick"]
        return f"mode: {mode}\n" + "\n".join(rows)


SETTINGS = Settings.from_env()


def device_line() -> str:
    """What the notebooks' first cell prints, so a learner knows which path a notebook takes: the GPU's name,
    Apple's GPU, or the CPU with the sizes to expect there (:mod:`~mlm_course.settings`)."""
    device = pick_device()
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)}"
    if device.type == "mps":
        return "Apple GPU (MPS)"
    if SETTINGS.quick:
        return "CPU: expect the quick sizes"
    return "CPU: the full sizes, a few minutes for most notebooks (MLM_COURSE_QUICK=1 for the quick ones)"
