"""Fine-tuning runs: :class:`FinetuneConfig` (every setting of ``mlm-course finetune``, one field per option), the
length-bucketed batches of each step, :func:`fit` (the runner with the classification loss, dev evaluation, the
best weights kept, early stopping) and :func:`run` (one complete run: load, fit, evaluate on dev and test, write).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, fields
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
from mlm_course.lab.hardware import Processes
from mlm_course.lab.run_files import RunResult, check_output_dir, write_json_atomic
from mlm_course.lab.runner import InvalidSettings, LoopConfig, OptimiserSettings, TrainLoop
from mlm_course.lab.seeds import generator_for
from mlm_course.masking import IGNORE_INDEX
from mlm_course.models import CONFIGS, hub_refusal
from mlm_course.precision import machine

BEST_DIR = "best"
RESULTS_FILE = "results.json"
COMPILE_WIDTH = 32  # with torch.compile: batch widths rounded up to a multiple of this (few shapes, no recompiles)


def _help(text: str, **kwargs) -> dict:
    return {"metadata": {"help": text}, **kwargs}


@dataclass(kw_only=True)
class FinetuneConfig(OptimiserSettings):
    """Every setting of a fine-tuning run; each field is the command line's option of the same name
    (``max_steps`` is ``--max-steps``), checked here, before any work (:class:`InvalidSettings`)."""

    model: str = field(default="minilm", **_help("'course', 'minilm', a transformers BERT folder, a hub name with "
                                                 "--allow-hub, or 'random:SIZE' for fresh weights"))
    allow_hub: bool = field(default=False, **_help("allow downloading --model from the Hugging Face hub"))
    max_length: int = field(default=128, **_help("tokens per sentence at most, [CLS] and [SEP] included"))
    train_examples: int | None = field(default=None, **_help("a seeded subset of the training set"))
    eval_examples: int | None = field(default=None, **_help("a seeded subset of dev and of test"))
    dropout: float | None = field(default=None, **_help("hidden, attention and classifier dropout (default: the "
                                                        "model's own)"))
    epochs: int = field(default=2, **_help("passes over the training set"))
    max_steps: int | None = field(default=None, **_help("stop after this many optimiser steps"))
    eval_every: int | None = field(default=None, **_help("dev evaluation every N steps (default: once per epoch)"))
    patience: int | None = field(default=3, **_help("dev evaluations without improvement before stopping"))
    eval_batch_size: int = field(default=64, **_help("sentences per evaluation batch"))
    pad_to_multiple_of: int | None = field(default=None, **_help("round batch widths up to a multiple of this "
                                                                 "(default: 8 on CUDA, none elsewhere; 1: never)"))
    lr: float = 5e-5
    warmup_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self):
        self.betas = tuple(self.betas)
        problems = self.problems(("epochs", "max_steps", "eval_every", "patience", "eval_batch_size",
                                  "train_examples", "eval_examples", "pad_to_multiple_of"))
        if self.max_length < MIN_MAX_LENGTH:
            problems["max_length"] = f"must be ≥ {MIN_MAX_LENGTH}, not {self.max_length!r}"
        if self.dropout is not None and not 0 <= self.dropout < 1:
            problems["dropout"] = f"must be in [0, 1), not {self.dropout!r}"
        shape = str(self.model).removeprefix(RANDOM_PREFIX)
        fresh_of_a_size = str(self.model).startswith(RANDOM_PREFIX) and shape in CONFIGS
        refusal = None if fresh_of_a_size else hub_refusal(shape, self.allow_hub or None, how="add --allow-hub",
                                                              known="'course', 'minilm', 'random:SIZE'")
        if refusal is not None:
            problems["model"] = refusal
        if problems:
            raise InvalidSettings("fine-tuning", problems)

    def padding_multiple(self, device_type: str) -> int | None:
        """Batch widths are rounded up to this: the setting when given (1: none), else a coarse multiple with
        torch.compile, 8 on CUDA (tensor cores like multiples of 8), none elsewhere."""
        if self.pad_to_multiple_of is not None:
            return self.pad_to_multiple_of if self.pad_to_multiple_of > 1 else None
        return COMPILE_WIDTH if self.compile else 8 if device_type == "cuda" else None

    def loop_config(self, batches_per_epoch: int, slots: int) -> LoopConfig:
        """``epochs`` passes over the batches (at most ``max_steps`` optimiser steps of ``slots`` micro-batches);
        dev evaluation every ``eval_every`` steps, else once per epoch."""
        total = math.ceil(batches_per_epoch * self.epochs / slots)
        total = total if self.max_steps is None else min(total, self.max_steps)
        shared = {f.name: getattr(self, f.name) for f in fields(OptimiserSettings)}
        per_epoch = math.ceil(batches_per_epoch / slots)
        return LoopConfig(**shared, steps=total, eval_every=self.eval_every or per_epoch, save_every=10**9)


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
    metrics: list[dict]
    description: str
    best_dir: Path | None = None
    tokens: int = 0  # input positions trained on by this process (padding included)


def better(row: dict, best: dict, loss_tolerance: float = 1e-4) -> bool:
    """Higher dev accuracy wins; at equal accuracy a dev loss lower by more than ``loss_tolerance``."""
    if row["accuracy"] != best["accuracy"]:
        return row["accuracy"] > best["accuracy"]
    return row["loss"] < best["loss"] - loss_tolerance


class BestOnDev:
    """Dev scoring for the runner, and the best dev evaluation so far: its row, its weights (on the CPU), its
    ``best/`` folder (with ``out``, main process only) and the evaluations since it (for ``patience``)."""

    def __init__(self, dev: Encoded, config: FinetuneConfig, *, pad_token_id: int, tokenizer, out: Path | None,
                 is_main: bool):
        self.dev = dev
        self.config = config
        self.pad_token_id = pad_token_id
        self.tokenizer = tokenizer
        self.out = out
        self.is_main = is_main
        self.model = None  # the runner's model, whose weights are kept: set once the runner exists
        self.row: dict | None = None  # the best dev evaluation so far
        self.state: dict | None = None  # its weights, on the CPU
        self.dir: Path | None = None  # its best/ folder
        self.since = 0  # evaluations since it

    def evaluate(self, model: torch.nn.Module) -> dict:
        log_probs = score(model, self.dev, pad_token_id=self.pad_token_id, batch_size=self.config.eval_batch_size)
        metrics = classification_metrics(self.dev.labels, log_probs.argmax(-1).tolist(), log_probs.shape[1])
        return {"loss": float(torch.nn.functional.nll_loss(log_probs, torch.tensor(self.dev.labels))), **metrics}

    def after_evaluation(self, row: dict) -> bool:
        """Keep the best dev row and weights; True when patience is exhausted."""
        if self.row is None or better(row, self.row):
            self.row = row
            self.since = 0
            self.state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            if self.out is not None and self.is_main:
                self.dir = write_folder_atomic(self.out / BEST_DIR, self._write)
        else:
            self.since += 1
        return self.config.patience is not None and self.since >= self.config.patience

    def _write(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(folder)
        write_json_atomic(folder / "dev_metrics.json", self.row)


def fit(model: torch.nn.Module, train: Encoded, dev: Encoded | None, config: FinetuneConfig, *, pad_token_id: int,
        tokenizer: PreTrainedTokenizerBase | None = None, out_dir: str | os.PathLike | None = None,
        progress: bool = True, verbose: bool = True, processes: Processes | None = None) -> FitResult:
    """Fine-tune ``model`` on ``train``: the runner calls :func:`mlm_course.steps.training_step` with
    :func:`~mlm_course.finetune.classification_loss`; dev evaluation keeps the best weights and stops after
    ``patience`` evaluations without gain. With ``out_dir`` the main process writes ``metrics.jsonl`` and the best
    model (``best/``, with ``tokenizer``) atomically. Under ``accelerate launch`` each process trains on its own
    micro-batches and every process scores all of dev, so all take the same decisions."""
    if len(train) < 1:
        raise ValueError("the training split is empty: pass at least one example")
    if config.patience is not None and dev is None:
        raise ValueError("early stopping needs a dev split: pass dev=... or set patience=None")
    processes = processes or Processes()
    slots = config.grad_accum * processes.count
    out = Path(out_dir) if out_dir is not None else None
    device_type = (config.device or ("cuda" if torch.cuda.is_available() else "cpu")).split(":")[0]
    batches = RunBatches(train, config.batch_size, seed=config.seed, pad_token_id=pad_token_id,
                         pad_to_multiple_of=config.padding_multiple(device_type), full_rows=config.compile)
    best = BestOnDev(dev, config, pad_token_id=pad_token_id, tokenizer=tokenizer, out=out,
                     is_main=processes.is_main) if dev is not None else None
    loop = TrainLoop(model, config.loop_config(batches.per_epoch, slots),
                     batch_for_step=lambda step, slot: batches(step * slots + slot), loss_fn=classification_loss,
                     evaluate=best.evaluate if best else None, after_evaluation=best.after_evaluation if best else None,
                     out_dir=out, checkpoints=False, eval_split="dev", progress=progress, processes=processes,
                     annotate=lambda step: {"epoch": round(step * slots / batches.per_epoch, 3)})
    if best is not None:
        best.model = loop.model
    if verbose and processes.is_main:
        print(loop.description, flush=True)
    done = loop.train()
    if best is not None and best.state is not None:
        loop.model.load_state_dict(best.state)
    return FitResult(loop.model.eval(), done.steps_done, round(done.steps_done * slots / batches.per_epoch, 3),
                     best.row["step"] if best and best.row else None, best.row if best else None, done.stopped_early,
                     done.seconds, done.metrics, loop.description, best.dir if best else None, done.tokens)


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
    processes = Processes()
    if out_dir is not None and processes.is_main:
        check_output_dir(out_dir)  # after the checks of the model and the data: a bad name leaves no folder behind
    parameters = sum(p.numel() for p in model.parameters())
    if verbose and processes.is_main:
        print(f"{config.model}: {parameters:,} parameters; {len(splits['train']):,} training, {len(splits['dev']):,} "
              f"dev and {len(splits['test']):,} test sentences", flush=True)
    wall = time.perf_counter()
    result = fit(model, splits["train"], splits["dev"], config, pad_token_id=tokenizer.pad_token_id,
                 tokenizer=tokenizer, out_dir=out_dir, progress=progress, verbose=verbose, processes=processes)
    evals = {split: evaluate(result.model, splits[split], pad_token_id=tokenizer.pad_token_id,
                             batch_size=config.eval_batch_size) for split in ("dev", "test")}
    summary = {"model": config.model, "parameters": parameters, "max_length": config.max_length,
               **_summary(splits, result, evals, time.perf_counter() - wall, config, processes.count)}
    if out_dir is not None and processes.is_main:
        for item in (result.model, tokenizer):
            item.save_pretrained(out_dir)
        write_json_atomic(Path(out_dir) / RESULTS_FILE, summary)
    if verbose and processes.is_main:
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
