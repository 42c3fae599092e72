"""Copy a finished `mlm-course pretrain` run into the package as the course checkpoint.

    mlm-course pretrain --minutes inf --size tiny --steps 14000 --lr 3e-3 --warmup-steps 700 --dropout 0 \
        --eval-every 500 --save-every 1000 --out runs/course-bert
    mlm-course pretrain --minutes inf --init-from runs/course-bert --steps 18000 --lr 1.5e-3 --warmup-steps 500 --dropout 0 \
        --eval-every 1000 --save-every 1000 --seed 1 --out runs/course-bert-stage2
    python scripts/ship_checkpoint.py runs/course-bert-stage2 --command "..." \
        --after runs/course-bert --after-command "..."
    cp -r mlm_course/data/course-bert runs/course-bert-stages12
    mlm-course pretrain --minutes inf --init-from runs/course-bert-stage2 --short-seq-prob 0.1 --steps 16000 --lr 1e-3 \
        --warmup-steps 500 --dropout 0 --eval-every 1000 --save-every 1000 --seed 3 --out runs/course-bert-stage3
    python scripts/ship_checkpoint.py runs/course-bert-stage3 --command "..." --after runs/course-bert-stages12

Copies the final model and tokenizer (save_pretrained files), metrics.jsonl and results.json into
``mlm_course/data/course-bert/``, adds the fill-mask probe results to results.json, and writes the model card.
With ``--after`` (the run this one continued, via ``--init-from``) the learning curves are joined (steps and
seconds of the later stage shifted after the earlier one), results.json lists the stages and sums steps, tokens
and time. ``--after`` may itself be a shipped checkpoint with stages (a copy of ``mlm_course/data/course-bert``):
its stages are kept and this run becomes the next one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from mlm_course import corpus
from mlm_course.atomic import write_folder_atomic
from mlm_course.models import load_mlm
from mlm_course.probes import probe_hits
from mlm_course.stored import read_metrics

FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "metrics.jsonl", "results.json")

CARD = """# course-bert: the BERT the course pretrained with its own code

The course's BERT, `mlm_course.bert.BertMLM` ({config}: {layers} layers, hidden {hidden}, {heads} heads, {parameters:,}
parameters), in a transformers `BertForMaskedLM` folder, trained from scratch by `mlm-course pretrain` on the
**train** split of the course corpus (Jane Austen's six novels + a Wikipedia sample; see DATA.md) with the course's
8,192-entry WordPiece vocabulary. Load it with `mlm_course.models.load_mlm("course")`, or
`AutoModelForMaskedLM.from_pretrained(this_folder)` and `AutoTokenizer.from_pretrained(this_folder)`.

## How it was made
```
{commands}
```
(`--init-from course` is the checkpoint shipped after the previous stage, i.e. that stage's `--out` folder: pass the
folder to reproduce the chain.)
{stages}- In all: {steps:,} steps, {tokens:,} tokens seen, {minutes:.0f} minutes on {machine} ({cpus} CPU cores, no GPU;
  torch {torch}).
- Every stage: AdamW (betas {betas}, weight decay {wd}), linear warm-up then linear decay to 0, gradient clipping at
  1.0, no dropout; dynamic masks (15 %, 80 / 10 / 10, Bernoulli), loss and output logits only at masked positions.

## Held-out results (frozen masks, {eval_tokens:,} masked tokens of the held-out chapters and articles)
| | loss (nats) | perplexity | top-1 | top-5 |
|---|---:|---:|---:|---:|
| this checkpoint | {loss:.3f} | {ppl:.0f} | {top1:.1%} | {top5:.1%} |
| unigram frequencies | {u_loss:.3f} | {u_ppl:.0f} | {u_top1:.1%} | {u_top5:.1%} |

Fill-mask on the {n_probes} probe sentences of `mlm_course.probes.PROBE_SENTENCES` (written for the course, not in
the corpus): an accepted answer is in the top 5 for {hits} of them. The learning curve is in `metrics.jsonl`.

## Licence
Trained on public-domain text (Austen) and on Wikipedia text (CC BY-SA 4.0, Wikipedia contributors), with a
vocabulary derived from both: the weights are shared under CC BY-SA 4.0, with attribution to Wikipedia's
contributors. The code that made them is Apache-2.0.
"""


def stage(results: dict, command: str) -> dict:
    """One training stage as the model card and notebook 06 describe it (``settings``: the run's, flat)."""
    return {"command": command, "steps": results["steps"], "tokens_seen": results["tokens_seen"],
            "seconds": results["seconds"], "heldout": results["heldout"], "settings": results["settings"]}


def joined_metrics(earlier: Path, later: Path, steps: int, seconds: float, stage: int) -> str:
    """metrics.jsonl of the run folders of the earlier stages and of a later one (number ``stage``) as one curve.

    The later stage's steps and seconds follow the earlier's; rows without a stage number belong to stage 1.
    """
    lines = [{"stage": 1} | row for row in read_metrics(earlier)]
    lines += [row | {"step": row["step"] + steps, "seconds": row.get("seconds", 0.0) + seconds, "stage": stage}
              for row in read_metrics(later)]
    return "".join(json.dumps(row) + "\n" for row in lines)


def warmup_text(settings: dict) -> str:
    """The warm-up of a run's recorded settings, as the model card says it: a step count (``warmup_steps``, which
    wins when given) or a share of the steps (``warmup_ratio``)."""
    if settings["warmup_steps"] is not None:
        return str(settings["warmup_steps"])
    return f"{settings['warmup_ratio']:.0%} of the"


def _stage_line(number: int, st: dict) -> str:
    settings = st["settings"]
    start = "random weights" if number == 1 else f"the weights of stage {number - 1}"
    if settings["stack_to"]:
        start += f", stacked to {settings['stack_to']} layers (layer i a copy of layer i mod the old depth)"
    if settings["short_seq_prob"]:
        start += f"; {settings['short_seq_prob']:.0%} of the sequences cut to a random shorter length"
    return (f"- Stage {number}, from {start}: {st['steps']:,} steps × batch {settings['batch_size']} × "
            f"{settings['seq_len']} tokens = {st['tokens_seen']:,} tokens, peak learning rate {settings['lr']}, "
            f"{warmup_text(settings)} warm-up steps, {st['seconds'] / 60:.0f} min; held-out loss after it "
            f"{st['heldout']['loss']:.3f}.\n")


def write_checkpoint(folder: Path, args: argparse.Namespace) -> dict:
    """Fill ``folder`` with the run's files, the joined stages, the probe results and the model card; returns
    results.json as written."""
    for name in FILES:
        shutil.copy2(args.run / name, folder / name)
    model, tokenizer = load_mlm(folder)
    hits = probe_hits(model, tokenizer)
    results = json.loads((folder / "results.json").read_text())
    stages = [stage(results, args.command)]
    if args.after is not None:
        earlier = json.loads((args.after / "results.json").read_text())
        stages[:0] = earlier.get("stages") or [stage(earlier, args.after_command)]
        (folder / "metrics.jsonl").write_text(joined_metrics(
            args.after, args.run, earlier["steps"], earlier["seconds"], len(stages)))
        for key in ("steps", "tokens_seen", "seconds"):
            results[key] = sum(st[key] for st in stages)
    results["stages"] = stages
    results["probes"] = {"top_k": 5, "hits": sum(r["hit"] for r in hits), "sentences": len(hits), "rows": hits}
    (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (folder / "README.md").write_text(model_card(results, model.config, args))
    return results


def model_card(results: dict, cfg, args: argparse.Namespace) -> str:
    """The model card of the shipped checkpoint: :data:`CARD` filled in from results.json and the model's config."""
    settings = results["settings"]
    held = results["heldout"]
    uni = results["unigram_baseline"]
    stages = results["stages"]
    hits = results["probes"]["rows"]
    shipping = f"python scripts/ship_checkpoint.py {args.run}" + (f" --after {args.after}" if args.after else "")
    return CARD.format(
        config=results["config"], layers=cfg.num_hidden_layers, hidden=cfg.hidden_size, heads=cfg.num_attention_heads,
        parameters=results["parameters"]["total"],
        commands="\n".join([st["command"] or "mlm-course pretrain …" for st in stages] + [shipping]),
        stages="".join(_stage_line(k, st) for k, st in enumerate(stages, 1)),
        steps=results["steps"], tokens=results["tokens_seen"],
        minutes=results["seconds"] / 60, machine=results["machine"]["platform"], cpus=results["machine"]["cpus"],
        torch=results["machine"]["torch"], betas=tuple(settings["betas"]), wd=settings["weight_decay"],
        eval_tokens=held["tokens"], loss=held["loss"], ppl=held["perplexity"], top1=held["top1"], top5=held["top5"],
        u_loss=uni["loss"], u_ppl=uni["perplexity"], u_top1=uni["top1"], u_top5=uni["top5"],
        n_probes=len(hits), hits=f"{sum(r['hit'] for r in hits)} of {len(hits)}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="the --out folder of a finished `mlm-course pretrain` run")
    parser.add_argument("--command", default="", help="the pretrain command line, for the model card")
    parser.add_argument("--after", type=Path, default=None, help="the finished run that RUN continued (--init-from)")
    parser.add_argument("--after-command", default="", help="the command line of the --after run")
    args = parser.parse_args()
    for folder in filter(None, (args.run, args.after)):
        missing = [name for name in FILES if not (folder / name).exists()]
        if missing:
            print(f"{folder} lacks {missing}: is the run finished?", file=sys.stderr)
            return 2
    target = corpus.asset_dir() / "course-bert"
    written: dict = {}
    write_folder_atomic(target, lambda folder: written.update(write_checkpoint(folder, args)))
    print(f"shipped {target}: top-5 probe hits {written['probes']['hits']} / {written['probes']['sentences']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
