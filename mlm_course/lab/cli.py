"""``mlm-course``: thin command-line wrappers over the package.

    mlm-course pretrain --config small --minutes 60 --out runs/small
    mlm-course fill-mask course "She opened the [MASK] and walked out."
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _mix(text: str) -> tuple[float, float, float]:
    try:
        parts = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--mask-mix wants three numbers like 0.8,0.1,0.1, got {text!r}") from None
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"--mask-mix wants three numbers (MASK,RANDOM,SAME), got {text!r}")
    return parts


def _common_options(*, lr: float, warmup_ratio: float) -> argparse.ArgumentParser:
    """The options `pretrain` and `finetune` share, as a parent parser (a new one per command: argparse shares
    the option objects between a parent and its children, so defaults set on one command would leak)."""
    from mlm_course.lab.precision import PRECISIONS

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--batch-size", type=int, default=32, help="examples per micro-batch and process (default: 32)")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimiser step")
    p.add_argument("--lr", type=float, default=lr, help=f"peak learning rate (AdamW; default {lr:g})")
    warmup = p.add_mutually_exclusive_group()
    warmup.add_argument("--warmup-ratio", type=float, default=warmup_ratio,
                        help=f"warm-up as a fraction of the optimiser steps (default: {warmup_ratio:g})")
    warmup.add_argument("--warmup-steps", type=int, default=None, help="warm-up as a number of optimiser steps")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: the best available)")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="auto: bf16 on GPUs of compute capability ≥ 8.0, fp16 + loss scaling on older GPUs; on a "
                        "CPU bf16 only where it has AVX512-BF16 or AMX and a bf16 matmul measures ≥ 1.2× faster "
                        "than fp32, else fp32")
    p.add_argument("--compile", action="store_true", help="torch.compile the training step (slow first steps)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _add_pretrain(sub) -> None:
    from mlm_course.models import CONFIGS
    from mlm_course.pretraining import CORPORA

    p = sub.add_parser(
        "pretrain", parents=[_common_options(lr=1e-3, warmup_ratio=0.05)],
        help="pretrain a BERT masked-LM from scratch on the course corpus",
        description="Pretrain a BERT masked language model from scratch on the shipped corpus (Austen + Wikipedia "
        "sample) with the course's WordPiece vocabulary. Writes checkpoints, metrics.jsonl, results.json and the "
        "final model (save_pretrained folder) to --out. Re-run with --resume to continue a killed run. Runs "
        "unchanged under `accelerate launch --multi_gpu --num_processes N -m mlm_course.lab.cli pretrain ...` (each "
        "process trains on its own batches of --batch-size; only the main process writes). Every option is "
        "checked before anything is written.",
    )
    p.add_argument("--config", choices=sorted(CONFIGS), default=None,
                   help="model size (default: small; with --init-from, the saved model's)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=1000, help="optimiser steps (default: 1000)")
    budget.add_argument("--minutes", type=float, help="wall-clock budget; the step count is calibrated to fit it")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence, [CLS] and [SEP] included")
    p.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout")
    p.add_argument("--mask-rate", type=float, default=0.15, help="share of tokens selected for prediction")
    p.add_argument("--mask-mix", type=_mix, default=(0.8, 0.1, 0.1), help="MASK,RANDOM,SAME shares (sum 1)")
    p.add_argument("--scheme", choices=["bernoulli", "fixed"], default="bernoulli", help="how positions are chosen")
    p.add_argument("--short-seq-prob", type=float, default=0.0, metavar="SHARE",
                   help="share of training sequences cut to a random shorter length, [SEP] and padding after it "
                        "(BERT's short_seq_prob, 0.1 there), so short inputs are not new to the model (default: 0)")
    p.add_argument("--full-logits", action="store_true", help="project every position to the vocabulary (slower)")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--save-every", type=int, default=500)
    p.add_argument("--corpus", choices=CORPORA, default="course",
                   help="training text: the course corpus (Austen + Wikipedia), or the unlabelled sentences of the "
                        "movie-review train split for domain-adaptive continued pretraining with --init-from "
                        "(never the dev or test sentences); held-out evaluation stays on the course corpus")
    p.add_argument("--max-chars", type=int, default=None,
                   help="use only this much training text (and a tenth of it of held-out text), for smoke runs")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    p.add_argument("--init-from", default=None, metavar="MODEL",
                   help="start from this saved model ('course' or a folder) instead of random weights "
                        "(continued pretraining; the model size is then the saved model's)")
    p.add_argument("--stack-to", type=int, default=None, metavar="LAYERS",
                   help="with --init-from: grow the model to this many layers first by progressive stacking "
                        "(layer i starts as a copy of layer i mod the old depth)")
    p.set_defaults(func=cmd_pretrain, parser=p)


def _option(field: str) -> str:
    """The command-line option of a settings field."""
    return {"model": "--config"}.get(field, "--" + field.replace("_", "-"))


def _settings_or_exit(parser: argparse.ArgumentParser, build):
    """``build()``, or a parser error naming each bad option (before anything is written)."""
    from mlm_course.lab.runner import InvalidSettings

    try:
        return build()
    except InvalidSettings as exc:
        parser.error("; ".join(f"{_option(name)} {problem}" for name, problem in exc.problems.items()))


def _optimiser_options(args) -> dict:
    """The :class:`~mlm_course.lab.runner.OptimiserSettings` fields both commands take from their options."""
    names = ("batch_size", "grad_accum", "lr", "warmup_ratio", "warmup_steps", "weight_decay", "seed", "device",
             "precision", "compile")
    return {name: getattr(args, name) for name in names}


def pretrain_inputs(args):
    """(PretrainSettings, TrainConfig) of parsed `pretrain` arguments; a bad option is a parser error naming it."""
    from mlm_course.lab.runner import TrainConfig
    from mlm_course.pretraining import PretrainSettings

    settings = _settings_or_exit(args.parser, lambda: PretrainSettings(
        model=args.config, init_from=args.init_from, stack_to=args.stack_to, corpus=args.corpus,
        max_chars=args.max_chars, seq_len=args.seq_len, dropout=args.dropout, mask_rate=args.mask_rate,
        mask_mix=args.mask_mix, scheme=args.scheme, short_seq_prob=args.short_seq_prob, sparse=not args.full_logits))
    config = _settings_or_exit(args.parser, lambda: TrainConfig(
        **_optimiser_options(args), steps=args.steps, eval_every=args.eval_every, save_every=args.save_every,
        minutes=args.minutes))
    return settings, config


def cmd_pretrain(args) -> int:
    from mlm_course import pretraining

    settings, config = pretrain_inputs(args)
    result = pretraining.run(settings, config, args.out, resume=args.resume, progress=not args.no_progress)
    if result.summary is not None:
        keys = ("steps", "tokens_seen", "seconds", "heldout", "unigram_baseline")
        print(json.dumps({k: result.summary[k] for k in keys}, indent=2))
    return 0


def _add_finetune(sub) -> None:
    p = sub.add_parser(
        "finetune", parents=[_common_options(lr=5e-5, warmup_ratio=0.1)],
        help="fine-tune a BERT for movie-review sentiment (accuracy and F1 on test, model chosen by dev)",
        description="Fine-tune a BERT sequence classifier on the shipped movie-review sentences (train 8,455 / "
        "dev 1,056 / test 1,057). Batches are bucketed by length and padded to their own longest sentence; AdamW "
        "with warm-up and linear decay, gradient clipping and accumulation; dev evaluation with early stopping. "
        "On a GPU: bf16 autocast (fp16 + loss scaling on older GPUs), TF32, optional torch.compile. Runs unchanged "
        "under `accelerate launch --multi_gpu --num_processes N -m mlm_course.lab.cli finetune ...`. Writes the best "
        "model and tokenizer (save_pretrained) to --out, with best/, metrics.jsonl and results.json.",
    )
    p.add_argument("--model", default="minilm",
                   help="'course' (shipped checkpoint), 'minilm' (installed MiniLM-L6 encoder, default), a "
                        "save_pretrained folder, a hub name with --allow-hub, or 'random:CONFIG' for fresh weights "
                        "(CONFIG: tiny, small, base with the course tokenizer, or any of the names above)")
    p.add_argument("--epochs", type=int, default=2, help="passes over the training set (default: 2)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimiser steps")
    p.add_argument("--max-length", type=int, default=128, help="tokens per sentence at most, [CLS]/[SEP] included")
    p.add_argument("--eval-every", type=int, default=None, help="dev evaluation every N steps (default: per epoch)")
    p.add_argument("--patience", type=int, default=3, help="dev evaluations without improvement before stopping")
    p.add_argument("--train-examples", type=int, default=None, help="use a seeded subset of the training set")
    p.add_argument("--eval-examples", type=int, default=None, help="use a seeded subset of dev and test")
    p.add_argument("--allow-hub", action="store_true", help="allow downloading --model from the Hugging Face hub")
    p.set_defaults(func=cmd_finetune, parser=p)


def cmd_finetune(args) -> int:
    from mlm_course.finetune import FinetuneConfig, run
    from mlm_course.lab.run_files import check_output_dir

    config = _settings_or_exit(args.parser, lambda: FinetuneConfig(
        **_optimiser_options(args), epochs=args.epochs, max_steps=args.max_steps, eval_every=args.eval_every,
        patience=args.patience))
    check_output_dir(args.out)
    result = run(args.model, config, max_length=args.max_length, train_examples=args.train_examples,
                 eval_examples=args.eval_examples, out_dir=args.out, allow_hub=args.allow_hub or None,
                 progress=not args.no_progress)
    if result.fit.accelerator.is_main_process:
        keys = ("model", "steps", "best_step", "dev", "test", "train_seconds")
        print(json.dumps({k: result.summary[k] for k in keys}, indent=2))
    return 0


def _add_fill_mask(sub) -> None:
    p = sub.add_parser(
        "fill-mask",
        help="show a model's top guesses for each [MASK]",
        description="Print the top-k tokens and probabilities for each [MASK] in TEXT. MODEL is 'course' (the "
        "shipped checkpoint), 'minilm' (installed MiniLM encoder, untrained MLM head), a save_pretrained folder, "
        "or a hub name with --allow-hub.",
    )
    p.add_argument("model", help="'course', 'minilm', a folder, or a hub name (with --allow-hub)")
    p.add_argument("text", help='text with one or more [MASK], e.g. "She opened the [MASK]."')
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--allow-hub", action="store_true", help="allow downloading from the Hugging Face hub")
    p.set_defaults(func=cmd_fill_mask)


def cmd_fill_mask(args) -> int:
    from mlm_course.models import fill_mask, load_mlm

    model, tokenizer = load_mlm(args.model, allow_hub=args.allow_hub or None)
    for index, guesses in enumerate(fill_mask(model, tokenizer, args.text, args.top_k), start=1):
        print(f"[MASK] #{index}: " + ", ".join(f"{token} ({prob:.3f})" for token, prob in guesses))
    return 0


def _add_data(sub) -> None:
    p = sub.add_parser(
        "data", help="count what the shipped data holds",
        description="Print, as JSON, the paragraphs, words, characters and documents of each pretraining split and "
        "source, the sentences of each sentiment split by class, and the BERT vocabulary's size (all offline).")
    p.set_defaults(func=cmd_data)


def cmd_data(args) -> int:
    from mlm_course.corpus import corpus_summary

    print(json.dumps(corpus_summary(), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlm-course", description="The mlm_course command line: pretrain and probe BERT masked-LMs."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_pretrain(sub)
    _add_fill_mask(sub)
    _add_finetune(sub)
    _add_data(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, PermissionError, ConnectionError) as exc:
        print(f"mlm-course {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

