"""Fine-tuning on the course's one training loop (:class:`mlm_course.lab.runner.TrainLoop`): the settings, dev
evaluation with early stopping, and the best weights kept in memory and written atomically to ``best/``."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from mlm_course.finetune.data import Encoded, RunBatches, make_loader
from mlm_course.finetune.metrics import _score, classification_metrics
from mlm_course.lab import precision as devices
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.lab.runner import InvalidSettings, OptimiserSettings, TrainConfig, TrainLoop

PRECISIONS = devices.PRECISIONS
BEST_DIR = "best"

#: Built in :mod:`mlm_course.lab.precision`; here because the notebook and older code call them from this module.
make_accelerator = devices.make_accelerator
describe_accelerator = devices.describe_accelerator


@dataclass(kw_only=True)
class FinetuneConfig(OptimiserSettings):
    """Settings of :func:`fit` (fine-tuning defaults; :class:`~mlm_course.lab.runner.OptimiserSettings` has the
    shared ones)."""

    epochs: int = 2
    max_steps: int | None = None  # stop after this many optimiser steps even within an epoch
    lr: float = 5e-5
    warmup_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    # dev evaluation every eval_every optimiser steps and once more after the last step, not at epoch ends
    # (None: at each epoch's end); patience counts every one of these evaluations
    eval_every: int | None = None
    patience: int | None = 3  # dev evaluations without improvement before stopping (None: never stop early)
    eval_batch_size: int = 64
    pad_to_multiple_of: int | None = None  # None: 8 on CUDA (tensor cores), none elsewhere; 1: never round

    def __post_init__(self):
        self.betas = tuple(self.betas)
        problems = self._problems(("epochs", "max_steps", "eval_every", "patience", "eval_batch_size"))
        if problems:
            raise InvalidSettings("fine-tuning", problems)


@dataclass
class FitResult:
    """What :func:`fit` did. ``model`` (unwrapped) holds the best dev weights (the last ones without dev)."""

    model: PreTrainedModel
    steps: int
    epochs: float
    best_step: int | None
    best_dev: dict | None
    stopped_early: bool
    seconds: float
    metrics: list[dict]
    description: str
    accelerator: Any = None
    best_dir: Path | None = None


def _save_best(model, tokenizer, out_dir: Path, row: dict) -> Path:
    """Write ``out_dir/best`` atomically: a temporary folder, then two renames (never half a model there)."""
    from transformers.utils import logging as hf_logging

    final, previous = out_dir / BEST_DIR, out_dir / f".{BEST_DIR}-previous"
    temp = Path(tempfile.mkdtemp(dir=out_dir, prefix=f".{BEST_DIR}-"))
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Writing model shards" at every improvement is noise
    try:
        model.save_pretrained(temp)
        if tokenizer is not None:
            tokenizer.save_pretrained(temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    write_json_atomic(temp / "dev_metrics.json", row)
    if previous.exists():
        shutil.rmtree(previous)
    if final.exists():
        os.replace(final, previous)
    os.replace(temp, final)
    shutil.rmtree(previous, ignore_errors=True)
    return final


def _better(row: dict, best: dict, loss_tolerance: float = 1e-4) -> bool:
    """Higher dev accuracy wins; at equal accuracy a dev loss lower by more than ``loss_tolerance``."""
    if row["accuracy"] != best["accuracy"]:
        return row["accuracy"] > best["accuracy"]
    return row["loss"] < best["loss"] - loss_tolerance


def padding_multiple(config: FinetuneConfig, device_type: str) -> int | None:
    """Batch widths are rounded up to this: ``config.pad_to_multiple_of`` when set (0 or 1: no rounding), else 8
    on CUDA (tensor cores want dimensions divisible by 8) and none elsewhere."""
    if config.pad_to_multiple_of is not None:
        return config.pad_to_multiple_of if config.pad_to_multiple_of > 1 else None
    return 8 if device_type == "cuda" else None


def _loop_config(config: FinetuneConfig, batches_per_epoch: int, slots: int) -> TrainConfig:
    """The :class:`TrainLoop` settings: ``epochs`` passes over the batches (at most ``max_steps`` optimiser steps,
    ``slots`` micro-batches each); dev evaluation every ``eval_every`` steps, else once per epoch."""
    per_epoch = math.ceil(batches_per_epoch / slots)
    total = math.ceil(batches_per_epoch * config.epochs / slots)
    total = total if config.max_steps is None else min(total, config.max_steps)
    shared = {f.name: getattr(config, f.name) for f in fields(OptimiserSettings)}
    return TrainConfig(**shared, steps=total, eval_every=config.eval_every or per_epoch, save_every=10**9)


class _BestOnDev:
    """Dev scoring for :class:`TrainLoop` and the best dev evaluation so far: its row, its weights (on the CPU), its
    ``best/`` folder (with ``out``, main process only) and the evaluations since it (for ``patience``)."""

    def __init__(self, dev: Encoded | None, config: FinetuneConfig, accelerator, *, pad_token_id: int,
                 pad_to_multiple_of: int | None, tokenizer: PreTrainedTokenizerBase | None, out: Path | None):
        self.dev, self.patience, self.accelerator, self.tokenizer, self.out = (
            dev, config.patience, accelerator, tokenizer, out)
        self.loader = None
        if dev is not None:
            self.loader = accelerator.prepare(make_loader(
                dev, pad_token_id, config.eval_batch_size, shuffle=False, pad_to_multiple_of=pad_to_multiple_of,
                pin_memory=accelerator.device.type == "cuda"))
        self.model = None  # the loop's model, whose weights are kept: set once the loop exists
        self.row, self.state, self.dir, self.since = None, None, None, 0

    def evaluate(self, model) -> dict:
        log_probs = _score(model, self.loader, len(self.dev), model.config.num_labels, self.accelerator)
        metrics = classification_metrics(self.dev.labels, log_probs.argmax(-1).tolist(), log_probs.shape[1])
        return {"loss": float(F.nll_loss(log_probs, torch.tensor(self.dev.labels))), **metrics}

    def after_evaluation(self, row: dict) -> bool:
        """Keep the best dev row and weights; True when patience is exhausted."""
        if self.row is None or _better(row, self.row):
            self.row, self.since = row, 0
            self.state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            if self.out is not None and self.accelerator.is_main_process:
                self.dir = _save_best(self.model, self.tokenizer, self.out, row)
        else:
            self.since += 1
        return self.patience is not None and self.since >= self.patience


def fit(
    model: PreTrainedModel,
    train: Encoded,
    dev: Encoded | None,
    config: FinetuneConfig,
    *,
    pad_token_id: int,
    tokenizer: PreTrainedTokenizerBase | None = None,
    out_dir: str | os.PathLike | None = None,
    progress: bool = True,
    verbose: bool = True,
    accelerator=None,
) -> FitResult:
    """Fine-tune ``model`` on ``train`` with :class:`mlm_course.lab.runner.TrainLoop`; evaluate on ``dev``, keep the
    best weights, stop after ``patience`` evaluations without gain.

    With ``out_dir`` the main process writes ``metrics.jsonl`` and the best model (``best/``, save_pretrained,
    with ``tokenizer``) atomically. Runs as is under ``accelerate launch`` (each process trains on its own
    micro-batches; dev is scored in shards and gathered, so every process takes the same decisions).
    """
    if len(train) < 1:
        raise ValueError("the training split is empty: pass at least one example")
    if config.patience is not None and dev is None:
        raise ValueError("early stopping needs a dev split: pass dev=... or set patience=None")
    accelerator = accelerator or make_accelerator(config.device, config.precision)
    out = Path(out_dir) if out_dir is not None else None
    slots = config.grad_accum * accelerator.num_processes
    multiple = padding_multiple(config, accelerator.device.type)
    batches = RunBatches(train, config.batch_size, seed=config.seed, pad_token_id=pad_token_id,
                         pad_to_multiple_of=multiple, min_rows=2 if config.compile else 1)
    if model.config.num_labels > 1 and model.config.problem_type is None:
        model.config.problem_type = "single_label_classification"  # else set at the first forward: a recompile
    loop_config = _loop_config(config, batches.per_epoch, slots)
    best = _BestOnDev(dev, config, accelerator, pad_token_id=pad_token_id, pad_to_multiple_of=multiple,
                      tokenizer=tokenizer, out=out)
    loop = TrainLoop(
        model, loop_config, batch_for_step=lambda step, slot: batches(step * slots + slot),
        compute_loss=lambda m, batch: (m(**batch).loss, {}),
        evaluate=best.evaluate if dev is not None else None, after_evaluation=best.after_evaluation,
        out_dir=out, checkpoints=False, eval_split="dev", progress=progress, accelerator=accelerator,
        annotate=lambda step: {"epoch": round(step * slots / batches.per_epoch, 3)})
    best.model = loop.model
    if verbose:
        accelerator.print(loop.description, flush=True)
    done = loop.train()
    model = loop.model
    if best.state is not None:
        model.load_state_dict(best.state)
    model.eval()
    return FitResult(model, done.steps_done, round(done.steps_done * slots / batches.per_epoch, 3),
                     best.row["step"] if best.row else None, best.row, done.stopped_early, done.seconds,
                     done.metrics, loop.description, accelerator, best.dir)
