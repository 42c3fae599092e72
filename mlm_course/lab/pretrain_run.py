"""Pretraining runs: :class:`PretrainConfig` (every setting of ``mlm-course pretrain``, one field per option),
the batches of each step, :func:`pretrain` (the lessons' loop with Accelerate and the masked-LM loss) and :func:`run`
(one complete run).

Every random draw of a run comes from its seed (:mod:`mlm_course.lab.seeds`): the blocks of micro-batch
(step, slot), their short-sequence cuts and masks, and the dropout of each step. A run resumed from a checkpoint
(Accelerate's ``save_state``: weights, optimiser, schedule, random states) therefore reaches the weights of an
uninterrupted one.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from mlm_course import corpus, models, tokenization
from mlm_course.lab.batch_order import check_enough_examples, cycle_batches, epoch_of, step_batches
from mlm_course.lab.hardware import accelerator_for, compiled
from mlm_course.lab.options import OptimiserSettings
from mlm_course.lab.run_files import RunResult, check_output_dir, write_json_atomic
from mlm_course.lab.seeds import generator_for
from mlm_course.lab.training_run import TrainingRun
from mlm_course.masking import MaskSpec
from mlm_course.objective import masked_lm_loss, masked_positions
from mlm_course.precision import machine, pick_device
from mlm_course.pretraining import (
    evaluate_masked_lm,
    frozen_eval_batches,
    mask_blocks,
    pack_blocks,
    shorten_blocks,
    unigram_baseline,
)
from mlm_course.train import InvalidSettings, TrainConfig, Trained, train_with_accelerate

CORPORA = ("course", "reviews")
PLAN_FILE = "plan.json"
RESULTS_FILE = "results.json"
DEFAULT_SIZE = "tiny"  # the model a run builds when neither --size nor --init-from is given
_PRETRAINING = TrainConfig.pretraining()  # the defaults of the steps, warm-up and time budget: one value of each
Batch = dict[str, torch.Tensor]


def _help(text: str, **kwargs) -> dict:
    return {"metadata": {"help": text}, **kwargs}


@dataclass(kw_only=True)
class PretrainConfig(OptimiserSettings):
    """Every setting of a pretraining run; each field is the command line's option of the same name
    (``mask_rate`` is ``--mask-rate``), checked here, before any work (:class:`InvalidSettings`). The defaults
    are :meth:`TrainConfig.pretraining`: the shipped checkpoint's first stage, stopped after 30 minutes."""

    size: str | None = field(default=None, **_help("model size: tiny, small or base (default tiny; with "
                                                     "--init-from, the saved model's)"))
    init_from: str | None = field(default=None, **_help("start from this saved model ('course' or a folder): "
                                                         "continued pretraining"))
    stack_to: int | None = field(default=None, **_help("with --init-from: grow the model to this many layers first "
                                                       "(progressive stacking)"))
    corpus: str = field(default="course", **_help("training text: 'course' (Austen + Wikipedia) or 'reviews' (the "
                                                  "movie-review train split, for adaptive pretraining)"))
    max_chars: int | None = field(default=None, **_help("use only this much training text (a tenth as much held-out "
                                                         "text), for smoke runs"))
    seq_len: int = field(default=128, **_help("tokens per sequence, [CLS] and [SEP] included"))
    dropout: float = field(default=0.0, **_help("hidden and attention dropout"))
    mask_rate: float = field(default=0.15, **_help("share of tokens selected for prediction"))
    mask_mix: tuple[float, float, float] = field(default=(0.8, 0.1, 0.1), **_help("shares of [MASK], random and "
                                                                                  "unchanged (sum 1)"))
    mask_scheme: str = field(default="bernoulli", **_help("'bernoulli' (each token at mask_rate) or 'fixed' "
                                                          "(round(mask_rate · n) per sequence)"))
    short_seq_prob: float = field(default=0.0, **_help("probability that a training sequence is cut to a random "
                                                       "shorter length (BERT's short_seq_prob, 0.1 there)"))
    static_copies: int | None = field(default=None, **_help("static masking: this many masked copies made once "
                                                            "(BERT's dupe_factor); default: a fresh mask each step"))
    sparse_logits: bool = field(default=True, **_help("project only the masked positions to the vocabulary"))
    steps: int = field(default=_PRETRAINING.steps, **_help("optimiser steps: the schedule decays to 0 at the last"))
    warmup_ratio: float = field(default=_PRETRAINING.warmup_ratio, **_help("warm-up as a fraction of the optimiser steps"))
    minutes: float | None = field(default=_PRETRAINING.minutes, **_help(
        "stop after this many minutes of the run (evaluations included), part-way down the schedule of --steps; "
        "inf: no time limit"))
    fit_schedule: bool = field(default=False, **_help("with --minutes: fit the step count, and with it the "
                                                      "schedule, to the budget (timed before the run) instead"))
    eval_every: int = field(default=250, **_help("held-out evaluation every N steps"))
    save_every: int = field(default=500, **_help("checkpoint every N steps"))

    def __post_init__(self):
        self.betas = tuple(self.betas)
        self.mask_mix = tuple(self.mask_mix)
        self.minutes = None if self.minutes == math.inf else self.minutes  # --minutes inf: no time limit
        problems = self.problems(("steps", "eval_every", "save_every", "max_chars", "static_copies", "stack_to"))
        problems |= self._mask_problems() | self._model_problems()
        checks = {"seq_len": (self.seq_len >= 3, "must be ≥ 3 ([CLS], a token, [SEP])"),
                  "dropout": (0 <= self.dropout < 1, "must be in [0, 1)"),
                  "short_seq_prob": (0 <= self.short_seq_prob <= 1, "is a probability: it must be in [0, 1]"),
                  "corpus": (self.corpus in CORPORA, f"must be one of {', '.join(CORPORA)}"),
                  "minutes": (self.minutes is None or self.minutes > 0, "must be > 0 (inf: no time limit)"),
                  "fit_schedule": (self.minutes is not None or not self.fit_schedule, "needs --minutes to fit")}
        problems |= {name: f"{why}, not {getattr(self, name)!r}" for name, (ok, why) in checks.items() if not ok}
        if problems:
            raise InvalidSettings("pretraining", problems)

    def _mask_problems(self) -> dict[str, str]:
        """The mask rate (a share in (0, 1): at 0 there is nothing to predict, at 1 nothing left to predict it
        from), then the mix and the scheme as :class:`~mlm_course.masking.MaskSpec` checks them."""
        rate = self.mask_rate
        problems = {}
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < 1:
            problems["mask_rate"] = f"must be in (0, 1): a share of the tokens below 1, not {rate!r}"
        for name in ("mask_mix", "mask_scheme"):
            try:
                MaskSpec(**{name: getattr(self, name)})
            except ValueError as exc:
                problems[name] = f"is refused: {exc}"
        return problems

    def _model_problems(self) -> dict[str, str]:
        problems = {}
        if self.size is not None and self.size not in models.CONFIGS:
            problems["size"] = f"{self.size!r} is not a model size: use one of {', '.join(models.CONFIGS)}"
        elif self.size is not None and self.init_from:
            problems["size"] = "is the size of the --init-from model: leave it out"
        if self.stack_to is not None and not self.init_from:
            problems["stack_to"] = "grows a trained model: give it together with --init-from"
        return problems

    @classmethod
    def from_settings(cls, settings: dict) -> PretrainConfig:
        """The configuration a run recorded (``results.json``'s ``settings``); options a later version of the
        course removed (``prefetch``) are left out, every other value is checked as on the command line."""
        names = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in settings.items() if name in names})

    @property
    def mask(self) -> MaskSpec:
        return MaskSpec(mask_rate=self.mask_rate, mask_mix=self.mask_mix, mask_scheme=self.mask_scheme)

    def train_config(self) -> TrainConfig:
        """The loop's settings (:class:`~mlm_course.train.TrainConfig`): every field of the same name."""
        names = [name for name in TrainConfig.__dataclass_fields__ if name != "keep_best"]
        return TrainConfig(**{name: getattr(self, name) for name in names})


# ---- the batches of each step ----------------------------------------------------------------------------------

POSITION_BUCKET = 64  # with torch.compile: masked positions padded to a multiple of this (few shapes, no recompiles)


def pad_positions(batch: Batch, multiple: int) -> Batch:
    """``masked_positions`` padded to a multiple of ``multiple`` with position 0 ([CLS], label −100: ignored by
    the loss), so a compiled model sees a few shapes instead of one per count of masked tokens."""
    positions = batch["masked_positions"]
    missing = -len(positions) % multiple
    return {**batch, "masked_positions": torch.cat([positions, positions.new_zeros(missing)])}


def seeded_batches(train_blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, config: PretrainConfig, *,
                   slots: int, make_batch: Callable[..., Batch] = mask_blocks,
                   word_starts: torch.Tensor | None = None) -> Callable[[int, int], Batch]:
    """``batch_for_step(step, slot)``: the rows of micro-batch ``slot`` of the step (``slots`` per step over all
    processes), cut short and masked with draws seeded by (step, slot); with ``static_copies``, the rows of the
    epoch's pre-masked copy. ``make_batch`` (:func:`~mlm_course.pretraining.mask_blocks`'s signature) masks the
    rows, e.g. with a bug to study. ``word_starts`` (bool, the shape of ``train_blocks``: True where a word begins)
    asks for whole-word masks (``config.mask`` with ``whole_word=True``)."""
    pick = cycle_batches(len(train_blocks), config.batch_size, config.seed)
    if word_starts is not None and word_starts.shape != train_blocks.shape:
        raise ValueError(f"word_starts has shape {tuple(word_starts.shape)}, the training blocks "
                         f"{tuple(train_blocks.shape)}: give one entry per token of the blocks.")
    spec = config.mask if word_starts is None else replace(config.mask, whole_word=True)

    def masked(rows: torch.Tensor | slice, generator: torch.Generator) -> Batch:
        ids, attention = shorten_blocks(train_blocks[rows], tokenizer, config.short_seq_prob, generator)
        words = {} if word_starts is None else {"word_starts": word_starts[rows]}
        return make_batch(ids, tokenizer, spec, generator, attention_mask=attention, **words)

    copies = [masked(slice(None), generator_for(config.seed, "static_masks", copy))
              for copy in range(config.static_copies or 0)]

    def batch_for_step(step: int, slot: int) -> Batch:
        rows = pick(step, slot, slots)
        if copies:
            epoch = epoch_of(step, slot, slots, len(train_blocks), config.batch_size)
            batch = {key: value[rows] for key, value in copies[epoch % len(copies)].items() if key != "masked_positions"}
            batch["masked_positions"] = masked_positions(batch["labels"])
        else:
            batch = masked(rows, generator_for(config.seed, "masks", step, slot))
        if not config.sparse_logits:
            return {key: value for key, value in batch.items() if key != "masked_positions"}
        return pad_positions(batch, POSITION_BUCKET) if config.compile else batch

    return batch_for_step


def pretrain(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, train_blocks: torch.Tensor,
             eval_blocks: torch.Tensor | None, config: PretrainConfig, *, out_dir: str | os.PathLike | None = None,
             resume: bool = False, progress: bool = False, word_starts: torch.Tensor | None = None) -> Trained:
    """Masked-LM pretraining of ``model`` on ``train_blocks`` with the settings of ``config``: the lessons' loop
    with Accelerate (:func:`mlm_course.train.train_with_accelerate`) and
    :func:`~mlm_course.objective.masked_lm_loss`. With ``out_dir``: ``metrics.jsonl`` and a checkpoint every
    ``save_every`` steps, which ``resume=True`` continues from; ``progress`` shows a progress bar.

    Held-out scores on ``eval_blocks`` (None: no evaluation) with frozen BERT masks (15 %, 80/10/10, whatever
    ``config``'s masks are), so runs with different training masks are comparable; every process scores all.
    ``word_starts`` (True where a word of ``train_blocks`` begins) trains with whole-word masks instead.
    """
    check_enough_examples(len(train_blocks), config.batch_size)
    accelerator = accelerator_for(config.precision, config.device)
    slots = config.grad_accum * accelerator.num_processes
    held_out = None if eval_blocks is None else partial(evaluate_masked_lm,
                                                        batches=frozen_eval_batches(eval_blocks, tokenizer))
    batch_for_step = seeded_batches(train_blocks, tokenizer, config, slots=slots, word_starts=word_starts)
    run = None if out_dir is None else TrainingRun(out_dir, save_every=config.save_every, settings=asdict(config),
                                                   resume=resume, progress=progress)
    return train_with_accelerate(compiled(model, config.compile), step_batches(batch_for_step, slots, config.seed),
                                 masked_lm_loss, config.train_config(), evaluate=held_out, accelerator=accelerator,
                                 run=run)


# ---- one complete run (`mlm-course pretrain`) ----------------------------------------------------------------------


def run(config: PretrainConfig, out_dir: str | os.PathLike, *, resume: bool = False, progress: bool = True,
        verbose: bool = True) -> RunResult:
    """Build the course tokenizer, the packed text and the model of ``config``, plan the steps, pretrain, and write
    to ``out_dir``: ``plan.json``, checkpoints, ``metrics.jsonl``, the final model and tokenizer (a transformers
    folder) and ``results.json`` (held-out scores next to the unigram baseline's, steps, tokens, time).

    Everything is checked and built before anything is written: a bad setting leaves no ``out_dir`` behind. The run
    stops after ``config.minutes`` (with ``fit_schedule``, the step count is calibrated to fit them first); with
    ``resume`` the plan of the run in ``out_dir`` is kept and training continues from its latest checkpoint.
    """
    from accelerate import PartialState

    out = Path(out_dir)
    processes = PartialState(cpu=pick_device(config.device).type == "cpu")  # the run's device (CPUs join over gloo)
    tokenizer = tokenization.course_tokenizer()
    train_blocks, eval_blocks = packed_text(config, tokenizer)
    check_enough_examples(len(train_blocks), config.batch_size)
    model, name = starting_model(config, tokenizer)
    config = replace(config, steps=_planned_steps(out, resume, model, tokenizer, train_blocks, config))
    check_output_dir(out)
    if processes.is_main_process:
        write_json_atomic(out / PLAN_FILE, {"steps": config.steps})
    if verbose and processes.is_main_process:
        budget = f", stopped after {config.minutes:g} minutes (--minutes)" if config.minutes else ""
        print(f"{name}: {models.count_parameters(model)['total']:,} parameters; {len(train_blocks):,} training and "
              f"{len(eval_blocks):,} held-out sequences of {config.seq_len}; a {config.steps:,}-step schedule{budget}",
              flush=True)
    result = pretrain(model, tokenizer, train_blocks, eval_blocks, config, out_dir=out, resume=resume,
                      progress=progress)
    if not processes.is_main_process:
        return RunResult(model, tokenizer, result, None)
    for item in (model, tokenizer):
        item.save_pretrained(out)
    summary = _summary(name, model, tokenizer, (train_blocks, eval_blocks), config, result, processes.num_processes)
    write_json_atomic(out / RESULTS_FILE, summary)
    return RunResult(model, tokenizer, result, summary)


def packed_text(config: PretrainConfig, tokenizer: PreTrainedTokenizerBase) -> tuple[torch.Tensor, torch.Tensor]:
    """(training, held-out) blocks of ``config.seq_len`` tokens; the held-out text is always the course corpus's."""
    chars = config.max_chars
    train = (corpus.pretraining_text("train", max_chars=chars) if config.corpus == "course"
             else corpus.review_training_text(max_chars=chars))
    heldout = corpus.pretraining_text("heldout", max_chars=chars and max(chars // 10, 1))
    return pack_blocks([train], tokenizer, config.seq_len), pack_blocks([heldout], tokenizer, config.seq_len)


def starting_model(config: PretrainConfig, tokenizer: PreTrainedTokenizerBase) -> tuple[torch.nn.Module, str]:
    """The model to pretrain and its size's name: fresh weights of ``config.size`` (seeded), or the ``init_from``
    model (stacked to ``stack_to`` layers), in fp32."""
    if not config.init_from:
        size = config.size or DEFAULT_SIZE
        return models.build_model(size, tokenizer, seed=config.seed, max_positions=config.seq_len,
                                  dropout=config.dropout), size
    model = models.load_for_training(config.init_from, tokenizer, seq_len=config.seq_len, dropout=config.dropout)
    name = models.size_of(model.config)
    if config.stack_to:
        model = models.stack_layers(model, config.stack_to)
        name = f"{name} stacked to {config.stack_to} layers"
    return model, name


def _planned_steps(out: Path, resume: bool, model, tokenizer, train_blocks, config: PretrainConfig) -> int:
    """The plan of the run being resumed, else (``fit_schedule``) the steps that fit ``config.minutes``, else
    ``config.steps``."""
    from accelerate.utils import broadcast_object_list

    if resume and (out / PLAN_FILE).exists():
        return json.loads((out / PLAN_FILE).read_text())["steps"]
    if not config.fit_schedule:
        return config.steps
    steps = calibrate_steps(model, tokenizer, train_blocks, config)
    return broadcast_object_list([steps])[0]  # every process runs the main process's count


def calibrate_steps(model, tokenizer, blocks: torch.Tensor, config: PretrainConfig) -> int:
    """Steps that fit ``config.minutes``, timed on a throw-away copy of the model (8 steps to warm up, then 20)."""
    probe = replace(config, steps=8, minutes=None, fit_schedule=False, eval_every=10**9, save_every=10**9)
    probe_model = copy.deepcopy(model)
    sample = blocks[: probe.batch_size]
    pretrain(probe_model, tokenizer, blocks, sample, probe)
    start = time.perf_counter()
    pretrain(probe_model, tokenizer, blocks, sample, replace(probe, steps=20))
    per_step = (time.perf_counter() - start) / 20
    return max(1, int(60 * config.minutes / per_step * 0.95))


def _summary(name: str, model, tokenizer, blocks: tuple[torch.Tensor, torch.Tensor], config: PretrainConfig,
             result: Trained, processes: int) -> dict:
    """results.json: the last held-out evaluation next to the unigram baseline on the same frozen masks."""
    train_blocks, eval_blocks = blocks
    evals = [m for m in result.history if m["split"] == "eval"]
    baseline = unigram_baseline(train_blocks, frozen_eval_batches(eval_blocks, tokenizer), len(tokenizer),
                                tokenizer.all_special_ids)
    tokens_per_step = config.batch_size * config.grad_accum * processes * train_blocks.shape[1]
    return {
        "config": name, "parameters": models.count_parameters(model), "steps": result.steps,
        "tokens_seen": result.steps * tokens_per_step, "processes": processes,
        "seconds": round(result.seconds, 1), "heldout": evals[-1] if evals else None, "unigram_baseline": baseline,
        "settings": asdict(config) | {"betas": list(config.betas), "mask_mix": list(config.mask_mix)},
        "machine": machine(next(model.parameters()).device),
    }
