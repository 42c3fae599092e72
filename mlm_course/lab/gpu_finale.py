"""Notebook 07's finale: fine-tune the biggest BERT this machine allows, and measure what it costs.

On a GPU (CUDA or Apple's MPS): ``bert-base-uncased`` when it is in the local Hugging Face cache or the hub is
allowed (``MLM_COURSE_ALLOW_HUB=1``); otherwise the course's BERT at the ``small`` size, pretrained here, on the GPU,
for a few minutes of the course recipe, then fine-tuned. On a CPU: the small path — the course checkpoint
fine-tuned briefly — so the notebook runs everywhere and prints the same table. Every row gives tokens/s, the
model FLOP utilisation (notebook 04's FLOP count ÷ the device's peak) and, for fine-tuning, test accuracy.

``python -m mlm_course.lab.gpu_finale --out FILE`` runs it outside a notebook (the GPU check's ``finale`` step).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from mlm_course import bert, models
from mlm_course.lab import finetune_run, pretrain_run
from mlm_course.lab.cli import _at_least_one
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.precision import autocast_dtype, notebook_precision, pick_device, utilisation

BERT_BASE = "bert-base-uncased"
#: What to expect of bert-base on the nearest public benchmark: SST-2 (GLUE), whose sentences come from the same
#: Rotten Tomatoes reviews (Pang & Lee 2005) as the course's, labelled there by phrase-level annotation
#: (Socher et al. 2013) with 67 k training phrases; Devlin et al. (2019), Table 1, GLUE test set.
PUBLISHED = {"model": BERT_BASE, "benchmark": "SST-2 (GLUE test set)", "accuracy": 0.935,
             "source": "Devlin et al. 2019, Table 1", "training_examples": 67_349}


@dataclass(frozen=True)
class FinaleSizes:
    """How much the finale trains: the GPU sizes by default; :data:`QUICK` for CI and the unit test."""

    pretrain_size: str = "small"
    pretrain_minutes: float = 4.0
    pretrain_batch_size: int = 128
    max_chars: int | None = None  # pretraining text (None: the whole training split)
    epochs: int = 2
    steps: int | None = None  # fine-tuning steps at most (None: the epochs)
    batch_size: int = 32
    train_examples: int | None = None
    eval_examples: int | None = None


QUICK = FinaleSizes(pretrain_size="tiny", pretrain_minutes=0.05, pretrain_batch_size=8, max_chars=60_000, epochs=1,
                    steps=6, batch_size=8, train_examples=64, eval_examples=64)


def bert_base_folder(allow_hub: bool | None = None) -> str | None:
    """bert-base-uncased's local folder: from the Hugging Face cache, or downloaded when the hub is allowed."""
    from huggingface_hub import try_to_load_from_cache

    cached = [try_to_load_from_cache(BERT_BASE, name) for name in ("config.json", "model.safetensors", "vocab.txt")]
    if all(isinstance(path, str) for path in cached):
        return str(Path(cached[0]).parent)
    return models.resolve(BERT_BASE, allow_hub=True) if models.hub_allowed(allow_hub) else None


def hosted_notebook() -> str | None:
    """"Colab" or "Kaggle" when the notebook runs there (a GPU and a network, as a rule), else None."""
    if "COLAB_RELEASE_TAG" in os.environ or "google.colab" in sys.modules:
        return "Colab"
    return "Kaggle" if "KAGGLE_KERNEL_RUN_TYPE" in os.environ else None


def pretrain_here(device: torch.device, sizes: FinaleSizes, work: Path) -> tuple[Path, dict]:
    """The course's BERT of ``sizes.pretrain_size`` pretrained on ``device`` for ``sizes.pretrain_minutes`` with
    the course recipe (no dropout, sparse logits, 10 % short sequences, auto precision)."""
    config = pretrain_run.PretrainConfig(
        size=sizes.pretrain_size, minutes=sizes.pretrain_minutes, fit_schedule=True, batch_size=sizes.pretrain_batch_size,
        max_chars=sizes.max_chars, lr=1e-3, warmup_ratio=0.06, dropout=0.0, short_seq_prob=0.1,
        eval_every=10**6, save_every=10**6, device=str(device), precision=notebook_precision(device), log_every=50)
    out = work / "pretrained"
    done = pretrain_run.run(config, out, progress=False, verbose=False)
    model, train = done.model, done.train
    flops = bert.flops_per_token(model.config, config.seq_len, training=True, head_share=config.mask_rate)
    rate, mfu = utilisation(flops, train.tokens, train.seconds, device, autocast_dtype(device, config.precision))
    return out, {"what": f"pretrain course BERT ({sizes.pretrain_size}) from scratch", "device": str(device),
                 "parameters": models.count_parameters(model)["total"], "steps": train.steps,
                 "minutes": round(train.seconds / 60, 2), "tokens_per_s": round(rate), "mfu": mfu,
                 "heldout_loss": done.summary["heldout"]["loss"]}


def fine_tune(source: str, name: str, device: torch.device, sizes: FinaleSizes, work: Path) -> dict:
    """Fine-tune ``source`` for sentiment on ``device`` (in fp32 on a CPU, the device's precision elsewhere: the
    notebook's one precision); tokens/s, utilisation and test accuracy."""
    config = finetune_run.FinetuneConfig(
        model=source, epochs=sizes.epochs, steps=sizes.steps, batch_size=sizes.batch_size,
        train_examples=sizes.train_examples, eval_examples=sizes.eval_examples, device=str(device), patience=None,
        precision=notebook_precision(device), log_every=50)
    done = finetune_run.run(config, out_dir=work / "finetuned", progress=False, verbose=False)
    train = done.train
    flops = bert.flops_per_token(done.model.config, config.max_length, training=True, head_share=0.0)
    rate, mfu = utilisation(flops, train.tokens, train.seconds, device, autocast_dtype(device, config.precision))
    return {"what": f"fine-tune {name}", "device": str(device),
            "parameters": done.summary["parameters"], "steps": train.steps,
            "minutes": round(train.seconds / 60, 2), "tokens_per_s": round(rate), "mfu": mfu,
            "test_accuracy": done.summary["test"]["accuracy"], "precision": train.description}


def gpu_branch(device: torch.device, work: Path, *, source: str | None, sizes: FinaleSizes = FinaleSizes()) -> list[dict]:
    """``source`` (bert-base-uncased's folder) fine-tuned; without one, a course BERT pretrained here first."""
    if source is not None:
        return [fine_tune(source, BERT_BASE, device, sizes, work)]
    folder, row = pretrain_here(device, sizes, work)
    return [row, fine_tune(str(folder), "the course BERT pretrained above", device, sizes, work)]


def gpu_plan(sizes: FinaleSizes = FinaleSizes()) -> str:
    """What the GPU branch does, in one sentence (the CPU branch prints it)."""
    return (f"on a GPU this cell fine-tunes {BERT_BASE} ({sizes.epochs} epochs) when it is in the Hugging Face "
            f"cache or the hub is allowed (allow_hub, on by default on Colab and Kaggle, or {models.HUB_ENV_VAR}=1); "
            f"otherwise it pretrains the course BERT at the {sizes.pretrain_size!r} "
            f"size there for {sizes.pretrain_minutes:g} minutes, then fine-tunes it")


def run(work: str | os.PathLike, *, device: str | None = None, quick: bool = False,
        sizes: FinaleSizes | None = None, allow_hub: bool | None = None) -> dict:
    """The finale on this machine's best device: the GPU branch on CUDA or MPS (bert-base when cached or
    ``allow_hub``), the course checkpoint on a CPU."""
    work, chosen = Path(work), pick_device(device)
    sizes = sizes or (QUICK if quick else FinaleSizes())
    if chosen.type == "cpu":
        short = replace(sizes, epochs=1, steps=sizes.steps or 60)
        rows = [fine_tune("course", "the course checkpoint", chosen, short, work)]
        return {"device": str(chosen), "branch": "cpu", "rows": rows}
    source = bert_base_folder(allow_hub)
    return {"device": str(chosen), "branch": "gpu", "rows": gpu_branch(chosen, work, source=source, sizes=sizes)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Notebook 07's finale outside a notebook; writes its rows as JSON.")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--work", type=Path, default=None, help="the runs' folders (default: beside --out)")
    parser.add_argument("--device", default=None, help="cuda, cuda:N, mps or cpu (default: the best available)")
    parser.add_argument("--quick", action="store_true", help="the tiny sizes of CI")
    parser.add_argument("--pretrain-minutes", type=float, default=None, help="minutes of pretraining on the GPU")
    parser.add_argument("--epochs", type=_at_least_one, default=None, help="fine-tuning epochs")
    args = parser.parse_args(argv)
    if args.pretrain_minutes is not None and not args.pretrain_minutes > 0:
        parser.error(f"--pretrain-minutes must be > 0, not {args.pretrain_minutes}")
    sizes = QUICK if args.quick else FinaleSizes()
    if args.pretrain_minutes is not None:
        sizes = replace(sizes, pretrain_minutes=args.pretrain_minutes)
    if args.epochs is not None:
        sizes = replace(sizes, epochs=args.epochs)
    finale = run(args.work or args.out.parent / "finale", device=args.device, sizes=sizes)
    write_json_atomic(args.out, {**finale, "sizes": asdict(sizes)})


if __name__ == "__main__":
    main()
