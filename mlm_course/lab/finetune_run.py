"""Fine-tuning runs: :class:`FinetuneConfig` (every setting of ``mlm-course finetune``, one field per option), the
length-bucketed batches of each step, :func:`fit` (the lessons' loop with Accelerate and the classification loss, dev
evaluation, the best weights kept and written, early stopping) and :func:`run` (one complete run: load, fit, evaluate
on dev and test, write).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from mlm_course.atomic import write_folder_atomic
from mlm_course.finetune import (
    RANDOM_PREFIX,
    Encoded,
    EvalResult,
    LengthBucketSampler,
    classification_loss,
    classification_metrics,
    evaluate,
    load_classifier,
    pad_batch,
    prediction_string,
    score,
    sentiment_data,
)
from mlm_course.finetune.data import MIN_MAX_LENGTH
from mlm_course.lab.batch_order import step_batches
from mlm_course.lab.hardware import accelerator_for, compiled, describe_accelerator
from mlm_course.lab.options import OptimiserSettings
from mlm_course.lab.run_files import RunResult, check_output_dir, write_json_atomic
from mlm_course.lab.seeds import generator_for
from mlm_course.lab.training_run import TrainingRun
from mlm_course.masking import IGNORE_INDEX
from mlm_course.models import CONFIGS, hub_refusal, needs_hub, resolve
from mlm_course.precision import machine, pick_device
from mlm_course.train import InvalidSettings, TrainConfig, fine_tuning_lr, train_with_accelerate

BEST_DIR = "best"
RESULTS_FILE = "results.json"
_FINE_TUNING = TrainConfig.fine_tuning()
COMPILE_WIDTH = 32  # with torch.compile: batch widths rounded up to a multiple of this (few shapes, no recompiles)


def _help(text: str, **kwargs) -> dict:
    return {"metadata": {"help": text}, **kwargs}


def model_width(shape: str) -> int:
    """The hidden size of the model ``--model`` names (``random:`` taken off), without loading its weights: a named
    size, the course checkpoint's or a folder's ``config.json``, else (a hub name) BERT-base's."""
    if shape in CONFIGS:
        return CONFIGS[shape]["hidden_size"]
    if needs_hub(shape):
        return CONFIGS["base"]["hidden_size"]
    return json.loads((Path(resolve(shape)) / "config.json").read_text())["hidden_size"]


@dataclass(kw_only=True)
class FinetuneConfig(OptimiserSettings):
    """Every setting of a fine-tuning run; each field is the command line's option of the same name
    (``eval_every`` is ``--eval-every``), checked here, before any work (:class:`InvalidSettings`)."""

    model: str = field(default="minilm", **_help("'course', 'minilm', a transformers BERT folder, a hub name with "
                                                 "--allow-hub, or 'random:SIZE' for fresh weights"))
    allow_hub: bool = field(default=False, **_help("allow downloading --model from the Hugging Face hub"))
    max_length: int = field(default=128, **_help("tokens per sentence at most, [CLS] and [SEP] included"))
    train_examples: int | None = field(default=None, **_help("a seeded subset of the training set"))
    eval_examples: int | None = field(default=None, **_help("a seeded subset of dev and of test"))
    dropout: float | None = field(default=None, **_help("hidden, attention and classifier dropout (default: the "
                                                        "model's own)"))
    epochs: int = field(default=2, **_help("passes over the training set"))
    steps: int | None = field(default=None, **_help("optimiser steps (default: --epochs passes over the training "
                                                    "set; given both, the fewer)"))
    eval_every: int | None = field(default=None, **_help("dev evaluation every N steps (default: once per epoch)"))
    patience: int | None = field(default=3, **_help("dev evaluations without improvement before stopping"))
    eval_batch_size: int = field(default=64, **_help("sentences per evaluation batch"))
    pad_to_multiple_of: int | None = field(default=None, **_help("round batch widths up to a multiple of this "
                                                                 "(default: 8 on CUDA, none elsewhere; 1: never)"))
    lr: float | None = field(default=None, **_help("peak learning rate (default: by the model's width, "
                                                   "mlm_course.train.fine_tuning_lr: 5e-4 for the course's tiny "
                                                   "BERT, 1e-4 for small ones and MiniLM, 2e-5 for BERT-base)"))
    betas: tuple[float, float] = _FINE_TUNING.betas  # notebook 07's recipe (TrainConfig.fine_tuning), not pretraining's
    eps: float = _FINE_TUNING.eps

    def __post_init__(self):
        self.betas = tuple(self.betas)
        problems = self._model_problems()
        if self.lr is None:  # the model's own rate; 1.0 stands in where the model itself is refused
            self.lr = 1.0 if problems else fine_tuning_lr(model_width(str(self.model).removeprefix(RANDOM_PREFIX)))
        problems |= self.problems(("epochs", "steps", "eval_every", "patience", "eval_batch_size",
                                   "train_examples", "eval_examples", "pad_to_multiple_of"))
        if self.max_length < MIN_MAX_LENGTH:
            problems["max_length"] = f"must be ≥ {MIN_MAX_LENGTH}, not {self.max_length!r}"
        if self.dropout is not None and not 0 <= self.dropout < 1:
            problems["dropout"] = f"must be in [0, 1), not {self.dropout!r}"
        if problems:
            raise InvalidSettings("fine-tuning", problems)

    def _model_problems(self) -> dict[str, str]:
        """Why ``model`` cannot be loaded here (a hub name while the hub is not allowed, MiniLM not installed, a
        folder without a config), if it cannot."""
        shape = str(self.model).removeprefix(RANDOM_PREFIX)
        if str(self.model).startswith(RANDOM_PREFIX) and shape in CONFIGS:
            return {}
        refusal = hub_refusal(shape, self.allow_hub or None, how="add --allow-hub",
                              known="'course', 'minilm', 'random:SIZE'")
        if refusal is None and not needs_hub(shape):
            try:
                resolve(shape)
            except FileNotFoundError as exc:
                refusal = str(exc)
        return {} if refusal is None else {"model": refusal}

    def padding_multiple(self, device_type: str) -> int | None:
        """Batch widths are rounded up to this: the setting when given (1: none), else a coarse multiple with
        torch.compile, 8 on CUDA (tensor cores like multiples of 8), none elsewhere."""
        if self.pad_to_multiple_of is not None:
            return self.pad_to_multiple_of if self.pad_to_multiple_of > 1 else None
        return COMPILE_WIDTH if self.compile else 8 if device_type == "cuda" else None

    def train_config(self, batches_per_epoch: int, slots: int, *, keep_best: bool) -> TrainConfig:
        """The loop's settings: ``epochs`` passes over the batches (at most ``steps`` optimiser steps of
        ``slots`` micro-batches), dev evaluation every ``eval_every`` steps, else once per epoch; the best dev
        accuracy's weights kept when ``keep_best``."""
        total = math.ceil(batches_per_epoch * self.epochs / slots)
        total = total if self.steps is None else min(total, self.steps)
        shared = {name: getattr(self, name) for name in TrainConfig.__dataclass_fields__
                  if name not in ("steps", "eval_every", "keep_best", "minutes")}
        return TrainConfig(**shared, steps=total, eval_every=self.eval_every or math.ceil(batches_per_epoch / slots),
                           keep_best="accuracy" if keep_best else None)


class RunBatches:
    """Training micro-batch ``g`` of a run (counted over steps and slots, epoch after epoch): the length-bucketed
    batches of epoch ``g // per_epoch`` in an order drawn from the run's seed, each padded to its own longest.
    ``full_rows`` pads every batch to ``batch_size`` rows with copies labelled −100 (ignored by the loss): a
    compiled model then sees one batch size."""

    def __init__(self, data: Encoded, batch_size: int, *, seed: int, pad_token_id: int,
                 pad_to_multiple_of: int | None = None, full_rows: bool = False):
        self.data = data
        self.batch_size = batch_size
        self.seed = seed
        self.full_rows = full_rows
        self.per_epoch = len(LengthBucketSampler(data.lengths, batch_size))
        self.collate = partial(pad_batch, pad_token_id=pad_token_id, pad_to_multiple_of=pad_to_multiple_of)
        self._epoch: int | None = None
        self._batches: list[list[int]] = []

    def __call__(self, g: int) -> dict[str, torch.Tensor]:
        epoch, position = divmod(g, self.per_epoch)
        if epoch != self._epoch:
            generator = generator_for(self.seed, "length_buckets", epoch)
            self._epoch = epoch
            self._batches = list(LengthBucketSampler(self.data.lengths, self.batch_size, generator=generator))
        rows = [{"input_ids": self.data.input_ids[i], "label": self.data.labels[i], "index": i}
                for i in self._batches[position]]
        if self.full_rows:
            rows += [{**rows[0], "label": IGNORE_INDEX, "index": -1}] * (self.batch_size - len(rows))
        batch = self.collate(rows)
        batch.pop("index")
        return batch


@dataclass
class FitResult:
    """What :func:`fit` did. ``model`` holds the best dev weights (the last ones without dev)."""

    model: torch.nn.Module
    steps: int
    epochs: float
    best_step: int | None
    best_dev: dict | None
    stopped_early: bool
    seconds: float
    history: list[dict]  # every logged row (the loop's Trained.history)
    description: str
    best_dir: Path | None = None
    tokens: int = 0  # input positions trained on by this process (padding included)


def dev_scores(model: torch.nn.Module, dev: Encoded, *, pad_token_id: int, batch_size: int) -> dict:
    """Loss, accuracy and F1 on ``dev`` (every process scores all of it, so all take the same decisions)."""
    log_probs = score(model, dev, pad_token_id=pad_token_id, batch_size=batch_size)
    metrics = classification_metrics(dev.labels, log_probs.argmax(-1).tolist(), log_probs.shape[1])
    return {"loss": float(torch.nn.functional.nll_loss(log_probs, torch.tensor(dev.labels))), **metrics}


class FineTuningRun(TrainingRun):
    """A fine-tuning run's files and progress bar, and: the best dev model written to ``best/`` (with the
    tokenizer and its dev row) whenever a dev evaluation is the best so far, and a stop after ``patience``
    evaluations without one."""

    def __init__(self, out_dir: str | os.PathLike | None, *, patience: int | None, tokenizer=None,
                 progress: bool = False):
        super().__init__(out_dir, progress=progress)
        self.patience, self.tokenizer = patience, tokenizer
        self.since, self.best_dir, self.stopped = 0, None, False

    def should_stop(self, step: int) -> bool:
        row = self.record.history[-1] if self.record.history else None
        if row is None or row["step"] != step or row["split"] == "train":
            return False  # no dev evaluation at this step
        if row is self.record.best:
            self.since = 0
            if self.out is not None and self.main:
                self.best_dir = write_folder_atomic(self.out / BEST_DIR, self._write)
        else:
            self.since += 1
        self.stopped = self.patience is not None and self.since >= self.patience and step < self.steps
        return self.stopped

    def _write(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(folder)
        write_json_atomic(folder / "dev_metrics.json", self.record.best)


def fit(model: torch.nn.Module, train: Encoded, dev: Encoded | None, config: FinetuneConfig, *, pad_token_id: int,
        tokenizer: PreTrainedTokenizerBase | None = None, out_dir: str | os.PathLike | None = None,
        progress: bool = True, verbose: bool = True) -> FitResult:
    """Fine-tune ``model`` on ``train`` with the lessons' loop with Accelerate
    (:func:`mlm_course.train.train_with_accelerate`) and :func:`~mlm_course.finetune.classification_loss`; dev
    evaluation keeps the best weights and stops after ``patience`` evaluations without gain. With ``out_dir`` the
    main process writes ``metrics.jsonl`` and the best model (``best/``, with ``tokenizer``) atomically. Under
    ``accelerate launch`` each process trains on its share of every step's micro-batches."""
    if len(train) < 1:
        raise ValueError("the training split is empty: pass at least one example")
    if config.patience is not None and dev is None:
        raise ValueError("early stopping needs a dev split: pass dev=... or set patience=None")
    accelerator = accelerator_for(config.precision, config.device)
    slots = config.grad_accum * accelerator.num_processes
    batches = RunBatches(train, config.batch_size, seed=config.seed, pad_token_id=pad_token_id,
                         pad_to_multiple_of=config.padding_multiple(accelerator.device.type), full_rows=config.compile)
    description = describe_accelerator(accelerator, config.compile)
    if verbose and accelerator.is_main_process:
        print(description, flush=True)
    run = FineTuningRun(out_dir, patience=config.patience, tokenizer=tokenizer, progress=progress)
    evaluate = None if dev is None else partial(dev_scores, dev=dev, pad_token_id=pad_token_id,
                                                batch_size=config.eval_batch_size)
    micro_batches = step_batches(lambda step, slot: batches(step * slots + slot), slots, config.seed)
    train_config = config.train_config(batches.per_epoch, slots, keep_best=dev is not None)
    done = train_with_accelerate(compiled(model, config.compile), micro_batches, classification_loss, train_config,
                                 evaluate=evaluate, split="dev", accelerator=accelerator, run=run)
    best = done.best
    return FitResult(done.model, done.steps, round(done.steps * slots / batches.per_epoch, 3),
                     best["step"] if best else None, best, run.stopped, done.seconds, done.history, description,
                     run.best_dir, done.tokens)


def run(config: FinetuneConfig, *, out_dir: str | os.PathLike | None = None, progress: bool = True,
        verbose: bool = True) -> RunResult:
    """Load ``config.model``, fine-tune on the sentiment train split, pick by dev, score dev and test.

    With ``out_dir``: the best model and tokenizer at the top of ``out_dir`` (a transformers folder), ``best/``,
    ``metrics.jsonl`` and ``results.json`` (dev/test accuracy and F1, hardware, time).
    """
    model, tokenizer = load_classifier(config.model, allow_hub=config.allow_hub or None, seed=config.seed,
                                       dropout=config.dropout)
    limit = model.config.max_position_embeddings
    if config.max_length > limit:
        raise ValueError(f"{config.model!r} has only {limit} positions: use --max-length {limit} or less")
    splits = {split: sentiment_data(tokenizer, split, max_length=config.max_length, examples=examples,
                                    seed=config.seed)
              for split, examples in (("train", config.train_examples), ("dev", config.eval_examples),
                                      ("test", config.eval_examples))}
    from accelerate import PartialState

    processes = PartialState(cpu=pick_device(config.device).type == "cpu")  # the run's device (CPUs join over gloo)
    if out_dir is not None and processes.is_main_process:
        check_output_dir(out_dir)  # after the checks of the model and the data: a bad name leaves no folder behind
    parameters = sum(p.numel() for p in model.parameters())
    if verbose and processes.is_main_process:
        print(f"{config.model}: {parameters:,} parameters; {len(splits['train']):,} training, {len(splits['dev']):,} "
              f"dev and {len(splits['test']):,} test sentences", flush=True)
    wall = time.perf_counter()
    result = fit(model, splits["train"], splits["dev"], config, pad_token_id=tokenizer.pad_token_id,
                 tokenizer=tokenizer, out_dir=out_dir, progress=progress, verbose=verbose)
    evals = {split: evaluate(result.model, splits[split], pad_token_id=tokenizer.pad_token_id,
                             batch_size=config.eval_batch_size) for split in ("dev", "test")}
    summary = {"model": config.model, "parameters": parameters, "max_length": config.max_length,
               **_summary(splits, result, evals, time.perf_counter() - wall, config, processes.num_processes)}
    if out_dir is not None and processes.is_main_process:
        for item in (result.model, tokenizer):
            item.save_pretrained(out_dir)
        write_json_atomic(Path(out_dir) / RESULTS_FILE, summary)
    if verbose and processes.is_main_process:
        test = evals["test"].metrics
        print(f"dev accuracy {evals['dev'].metrics['accuracy']:.4f}, test accuracy {test['accuracy']:.4f}, "
              f"F1 {test['f1']:.4f} ({result.seconds:.0f} s of training)", flush=True)
    return RunResult(result.model, tokenizer, result, summary)


def _summary(splits: dict[str, Encoded], result: FitResult, evals: dict[str, EvalResult], seconds: float,
             config: FinetuneConfig, processes: int) -> dict:
    """``results.json`` after the model's name, size and ``max_length``: data, steps, metrics, time, hardware."""
    def short(metrics: dict) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in metrics.items()}

    return {
        **{f"{split}_examples": len(data) for split, data in splits.items()},
        "steps": result.steps, "epochs": result.epochs, "best_step": result.best_step,
        "stopped_early": result.stopped_early, **{split: short(e.metrics) for split, e in evals.items()},
        "test_predictions": prediction_string(evals["test"].predictions),  # for paired comparisons
        "train_seconds": round(result.seconds, 1), "total_seconds": round(seconds, 1),
        "precision": result.description,
        "hardware": {**machine(next(result.model.parameters()).device), "processes": processes},
        "settings": asdict(config) | {"betas": list(config.betas)}, "date": time.strftime("%Y-%m-%d"),
    }
