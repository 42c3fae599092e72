"""``mlm-course``: the command line.

    mlm-course pretrain --out runs/my-bert   # 30 minutes of the checkpoint's first stage: a BERT in a lunch break
    mlm-course pretrain --minutes inf --out runs/stage-1   # all of the first stage: 14,000 steps
    mlm-course finetune --model course --epochs 2 --out runs/course-sentiment
    mlm-course fill-mask course "She opened the [MASK] and walked out."

Every option of ``pretrain`` and ``finetune`` is a field of the command's one configuration dataclass
(:class:`~mlm_course.lab.pretrain_run.PretrainConfig`, :class:`~mlm_course.lab.finetune_run.FinetuneConfig`) with
the same name — ``--mask-rate`` is ``mask_rate`` — so the parser is made from the dataclass, and a bad value is
refused by the dataclass, naming the option, before anything is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path


def option(name: str) -> str:
    """The command-line option of a configuration field: ``mask_rate`` → ``--mask-rate``."""
    return "--" + name.replace("_", "-")


def _numbers(name: str, count: int):
    def parse(text: str) -> tuple[float, ...]:
        try:
            values = tuple(float(x) for x in text.split(","))
        except ValueError:
            values = ()
        if len(values) != count:
            raise argparse.ArgumentTypeError(f"{option(name)} wants {count} numbers separated by commas, got {text!r}")
        return values

    return parse


def _at_least_one(text: str) -> int:
    """A whole number ≥ 1 from the command line, or the parser's error naming the option."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 1, not {text!r}")
    return value


def _parse_as(field: dataclasses.Field) -> dict:
    """argparse keywords for a field, from its annotation (a string: the modules use postponed annotations)."""
    kind = str(field.type).replace(" | None", "")
    if kind == "bool":
        return {"action": argparse.BooleanOptionalAction}
    if kind.startswith("tuple["):
        return {"type": _numbers(field.name, kind.count("float")), "metavar": ",".join(["X"] * kind.count("float"))}
    return {"type": {"int": int, "float": float, "str": str}[kind]}


def add_config_options(parser: argparse.ArgumentParser, config_class) -> None:
    """One option per field of ``config_class``, named after it, with its default and help."""
    from mlm_course.lab.options import OptimiserSettings

    shared = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(OptimiserSettings)}
    for field in dataclasses.fields(config_class):
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        text = field.metadata.get("help") or shared.get(field.name, "")
        keywords = _parse_as(field)
        if "default" not in text and "action" not in keywords:  # BooleanOptionalAction adds its own default
            text += f" (default: {default})"
        parser.add_argument(option(field.name), dest=field.name, default=default, help=text, **keywords)


def config_from(args: argparse.Namespace, config_class):
    """The configuration of parsed ``args``; a bad value is a parser error naming each bad option."""
    from mlm_course.train import InvalidSettings

    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(config_class)}
    try:
        return config_class(**values)
    except InvalidSettings as exc:
        args.parser.error("; ".join(f"{option(name)} {problem}" for name, problem in exc.problems.items()))


def _training_command(sub, name: str, config_class, func, **texts) -> argparse.ArgumentParser:
    """A training command: ``--out``, ``--no-progress`` and one option per field of ``config_class``."""
    p = sub.add_parser(name, **texts)
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_options(p, config_class)
    p.set_defaults(func=func, parser=p, config_class=config_class)
    return p


def _add_pretrain(sub) -> None:
    from mlm_course.lab.pretrain_run import PretrainConfig

    p = _training_command(
        sub, "pretrain", PretrainConfig, cmd_pretrain,
        help="pretrain a BERT masked-LM from scratch on the course corpus",
        description="Pretrain the course's BERT (mlm_course.bert) as a masked language model on the shipped corpus "
        "(Austen + Wikipedia sample) with the course's WordPiece vocabulary. Writes checkpoints, metrics.jsonl, "
        "results.json and the final model (a transformers folder) to --out. Re-run with --resume to continue a "
        "killed run. Runs unchanged under `python -m accelerate.commands.launch --multi_gpu --num_processes N -m "
        "mlm_course.lab.cli pretrain ...` (each process trains on its own batches of --batch-size; only the main "
        "process writes). Every option is checked before anything is written.")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")


def cmd_pretrain(args) -> int:
    from mlm_course.lab import pretrain_run

    result = pretrain_run.run(config_from(args, args.config_class), args.out, resume=args.resume,
                              progress=not args.no_progress)
    if result.summary is not None:
        keys = ("steps", "tokens_seen", "seconds", "heldout", "unigram_baseline")
        print(json.dumps({k: result.summary[k] for k in keys}, indent=2))
    return 0


def _add_finetune(sub) -> None:
    from mlm_course.lab.finetune_run import FinetuneConfig

    _training_command(
        sub, "finetune", FinetuneConfig, cmd_finetune,
        help="fine-tune a BERT for movie-review sentiment (accuracy and F1 on test, model chosen by dev)",
        description="Fine-tune the course's BERT with a classification head on the shipped movie-review sentences "
        "(train 8,455 / dev 1,056 / test 1,057). Batches are bucketed by length and padded to their own longest "
        "sentence; AdamW with warm-up and linear decay, gradient clipping and accumulation; dev evaluation with "
        "early stopping. On a GPU: bf16 autocast (fp16 + loss scaling on older GPUs), TF32, optional "
        "torch.compile. Runs unchanged under `python -m accelerate.commands.launch --multi_gpu --num_processes N -m "
        "mlm_course.lab.cli finetune ...`. Writes the best model and tokenizer (a transformers folder) to --out, "
        "with best/, metrics.jsonl and results.json.")


def cmd_finetune(args) -> int:
    from mlm_course.lab import finetune_run

    config = config_from(args, args.config_class)
    result = finetune_run.run(config, out_dir=args.out, progress=not args.no_progress)
    if result.summary is not None:
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
    p.add_argument("--top-k", type=_at_least_one, default=5, help="guesses per [MASK] (default: 5)")
    p.add_argument("--allow-hub", action="store_true", help="allow downloading from the Hugging Face hub")
    p.set_defaults(func=cmd_fill_mask, parser=p)


def cmd_fill_mask(args) -> int:
    from mlm_course.models import fill_mask, hub_refusal, load_mlm

    refusal = hub_refusal(args.model, args.allow_hub or None, how="add --allow-hub")
    if refusal is not None:
        args.parser.error(f"MODEL {refusal}")
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


def _add_notebooks(sub) -> None:
    p = sub.add_parser(
        "notebooks", help="copy the course's notebooks into a folder of your own",
        description="Copy the course's notebooks (with their stored outputs) and the results files they read into "
        "DEST, from the installed package (or, in a clone, from notebooks/). Files already there and identical are "
        "left alone; an edited copy is never overwritten without --force. Then: jupyter lab DEST")
    p.add_argument("dest", type=Path, metavar="DEST", help="the folder to copy into (created if missing)")
    p.add_argument("--force", action="store_true", help="overwrite copies you have edited")
    p.set_defaults(func=cmd_notebooks)


def cmd_notebooks(args) -> int:
    from mlm_course.lab.course_files import copy_notebooks

    written = copy_notebooks(args.dest, force=args.force)
    print(f"{len(written)} files written to {args.dest}; open them with: jupyter lab {args.dest}")
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
    _add_notebooks(sub)
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

