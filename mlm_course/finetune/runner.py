"""One complete fine-tuning run — load, fit, evaluate on dev and test, write ``results.json`` — as the CLI and
``scripts/finetune_comparison.py`` call it."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from mlm_course.finetune.classifier import load_classifier
from mlm_course.finetune.data import Encoded, _check_max_length, sentiment_data
from mlm_course.finetune.loop import FinetuneConfig, FitResult, fit, make_accelerator
from mlm_course.finetune.metrics import EvalResult, evaluate
from mlm_course.lab import precision as devices
from mlm_course.lab.run_files import write_json_atomic

RESULTS_FILE = "results.json"


def hardware(accelerator=None) -> dict:
    """Where a run happened (for results files): :func:`mlm_course.lab.precision.machine` plus the process count."""
    info = devices.machine(accelerator.device.type if accelerator is not None else None)
    info["processes"] = accelerator.num_processes if accelerator is not None else 1
    return info


@dataclass
class RunResult:
    """A complete fine-tuning run: the fitted model, its tokenizer, dev/test evaluations and a JSON summary."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    fit: FitResult
    dev: EvalResult
    test: EvalResult
    summary: dict


def run(
    name: str,
    config: FinetuneConfig,
    *,
    max_length: int = 128,
    train_examples: int | None = None,
    eval_examples: int | None = None,
    out_dir: str | os.PathLike | None = None,
    allow_hub: bool | None = None,
    dropout: float | None = None,
    progress: bool = True,
    verbose: bool = True,
) -> RunResult:
    """Load ``name``, fine-tune on the sentiment train split, pick by dev, score dev and test.

    With ``out_dir``: the best model and tokenizer (save_pretrained) at the top of ``out_dir``, ``best/``,
    ``metrics.jsonl`` and ``results.json`` (dev/test accuracy and F1, hardware, time).
    """
    _check_max_length(max_length)
    model, tokenizer = load_classifier(name, allow_hub=allow_hub, seed=config.seed, dropout=dropout)
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and max_length > limit:
        raise ValueError(f"{name!r} has only {limit} positions: use max_length ≤ {limit}")
    splits = {split: sentiment_data(tokenizer, split, max_length=max_length, examples=examples, seed=config.seed)
              for split, examples in (("train", train_examples), ("dev", eval_examples), ("test", eval_examples))}
    parameters = sum(p.numel() for p in model.parameters())
    accelerator = make_accelerator(config.device, config.precision)
    if verbose:
        accelerator.print(f"{name}: {parameters:,} parameters; {len(splits['train']):,} training, "
                          f"{len(splits['dev']):,} dev and {len(splits['test']):,} test sentences", flush=True)
    wall = time.perf_counter()
    result = fit(model, splits["train"], splits["dev"], config, pad_token_id=tokenizer.pad_token_id,
                 tokenizer=tokenizer, out_dir=out_dir, progress=progress, verbose=verbose, accelerator=accelerator)
    evals = {split: evaluate(result.model, splits[split], pad_token_id=tokenizer.pad_token_id,
                             batch_size=config.eval_batch_size, accelerator=accelerator) for split in ("dev", "test")}
    summary = {"model": name, "parameters": parameters, "max_length": max_length,
               **_summary(splits, result, evals, time.perf_counter() - wall, config, accelerator)}
    if out_dir is not None and accelerator.is_main_process:
        _write_run(Path(out_dir), result, tokenizer, summary)
    if verbose:
        test = evals["test"].metrics
        accelerator.print(f"dev accuracy {evals['dev'].metrics['accuracy']:.4f}, test accuracy "
                          f"{test['accuracy']:.4f}, F1 {test['f1']:.4f} ({result.seconds:.0f} s of training)",
                          flush=True)
    return RunResult(result.model, tokenizer, result, evals["dev"], evals["test"], summary)


def _summary(splits: dict[str, Encoded], result: FitResult, evals: dict[str, EvalResult], seconds: float,
             config: FinetuneConfig, accelerator) -> dict:
    """``results.json`` after the model's name, size and ``max_length``: data, steps, metrics, time, hardware."""
    return {
        **{f"{split}_examples": len(data) for split, data in splits.items()},
        "steps": result.steps, "epochs": result.epochs, "best_step": result.best_step,
        "stopped_early": result.stopped_early,
        **{split: _short(e.metrics) for split, e in evals.items()},
        "train_seconds": round(result.seconds, 1), "total_seconds": round(seconds, 1),
        "precision": result.description, "hardware": hardware(accelerator),
        "config": asdict(config) | {"betas": list(config.betas)},
        "date": time.strftime("%Y-%m-%d"),
    }


def _write_run(out: Path, result: FitResult, tokenizer: PreTrainedTokenizerBase, summary: dict) -> None:
    """The best model at the top of ``out`` (copied from ``best/``, next to the run's logs; without dev, the final
    one) and ``results.json``."""
    if result.best_dir is not None:
        shutil.copytree(result.best_dir, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("dev_*"))
    else:
        result.model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    write_json_atomic(out / RESULTS_FILE, summary)


def _short(metrics: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in metrics.items()}
