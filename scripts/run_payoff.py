"""What pretraining buys (notebook 07, section 8): zero-shot word order, label-efficiency grids, resumable.

    .venv/bin/python scripts/run_payoff.py zero-shot                  # real vs corrupted: PLL per model, n-grams
    .venv/bin/python scripts/run_payoff.py grid --recipe before       # the first comparison's settings (collapses)
    .venv/bin/python scripts/run_payoff.py grid                       # the fixed recipe: every task, model, budget
    .venv/bin/python scripts/run_payoff.py grid --models tapt --tasks sentiment --source tapt=runs/tapt
    .venv/bin/python scripts/run_payoff.py grid --models course_pll --tasks word_order   # PLL numbers + regression
    .venv/bin/python scripts/run_payoff.py merge a.json b.json --tapt runs/tapt   # grids run in parallel, one file

Everything lands in notebooks/results/pretraining_payoff.json (``--out`` elsewhere); a killed grid resumes where it
stopped. The task-adapted checkpoint (task-adaptive pretraining, Gururangan et al. 2020) comes from ``mlm-course pretrain --init-from course --corpus reviews ...``
(the command is stored with the results).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from mlm_course import label_efficiency as le
from mlm_course import ngram, word_order
from mlm_course.lab import label_grid
from mlm_course.lab.run_files import write_json_atomic

RESULTS = Path(__file__).resolve().parents[1] / "notebooks" / "results" / "pretraining_payoff.json"
#: the task-adapted checkpoint of the stored results: 1,000 steps from the course checkpoint on the unlabelled
#: sentiment training sentences (never dev or test); dropout 0 and 10 % short sequences as in the checkpoint's last
#: stage, half its peak learning rate
TAPT_COMMAND = ("mlm-course pretrain --init-from course --corpus reviews --steps 1000 --lr 5e-4 --warmup-ratio 0.1 "
                "--dropout 0 --short-seq-prob 0.1 --save-every 250 --precision fp32 --out runs/tapt")


def budget(text: str) -> int | None:
    return None if text == "all" else int(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("zero-shot", "grid", "merge"))
    parser.add_argument("inputs", nargs="*", type=Path, help="merge: result files to combine into --out")
    parser.add_argument("--tapt", type=Path, default=None, help="merge: the task-adapted run folder to describe")
    parser.add_argument("--replace", action="store_true", help="merge: a later file's run replaces an earlier one's")
    parser.add_argument("--drop-models", nargs="*", default=[], help="merge: leave these models' rows out")
    parser.add_argument("--tasks", nargs="+", default=list(le.TASKS), choices=le.TASKS)
    parser.add_argument("--models", nargs="+", default=[*label_grid.MODELS, *le.BOW_NGRAMS])
    parser.add_argument("--budgets", nargs="+", type=budget, default=list(le.LABEL_COUNTS), help="numbers or 'all'")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--recipe", default="balanced", choices=("balanced", "before"))
    parser.add_argument("--source", nargs="*", default=[], help="KEY=FOLDER for models that are not built in")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    command = "scripts/run_payoff.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.what == "zero-shot":
        training = word_order.corpus_sentences("train")  # the text the course checkpoint was pretrained on
        counted = {f"{name}gram": ngram.NgramModel(training, order) for name, order in (("bi", 2), ("tri", 3))}
        domains = {"heldout": word_order.split("test").pairs(), "reviews": word_order.review_split().pairs()}
        masked_lms = label_grid.zero_shot_models()
        table = {domain: label_grid.zero_shot_table(pairs, masked_lms, counted) for domain, pairs in domains.items()}
        for domain, rows in table.items():
            print(domain, {key: round(row["accuracy"], 4) for key, row in rows.items()}, flush=True)
        document = label_grid.read_results(args.out)
        write_json_atomic(args.out, document | {"zero_shot": table, "zero_shot_command": command})
        return
    if args.what == "merge":
        document = label_grid.merge_results([label_grid.read_results(path) for path in args.inputs],
                                            replace=args.replace)
        document["rows"] = [row for row in document["rows"] if row["model"] not in args.drop_models]
        document["commands"].append(command)
        if args.tapt is not None:
            losses = {key: label_grid.review_masked_lm_loss(name) for key, name in (("course", "course"), ("tapt", args.tapt))}
            document["tapt"] = label_grid.describe_run(args.tapt) | {"command": TAPT_COMMAND, "review_dev_mlm": losses}
        write_json_atomic(args.out, document)
        print(f"{len(document['rows'])} rows -> {args.out}")
        return
    sources = dict(item.split("=", 1) for item in args.source)
    label_grid.run_grid(args.out, tasks=args.tasks, models=args.models, budgets=args.budgets, seeds=args.seeds,
                        sources=sources, recipe_name=args.recipe, command=command)


if __name__ == "__main__":
    main()
