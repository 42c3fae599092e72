"""What pretraining buys (notebook 07, section 8): zero-shot word order, label-efficiency grids, resumable.

    .venv/bin/python scripts/run_payoff.py zero-shot                  # PLL(real) > PLL(corrupted) per model
    .venv/bin/python scripts/run_payoff.py grid --recipe before       # the first comparison's settings (collapses)
    .venv/bin/python scripts/run_payoff.py grid                       # the fixed recipe: every task, model, budget
    .venv/bin/python scripts/run_payoff.py grid --models dapt --tasks sentiment --source dapt=runs/dapt
    .venv/bin/python scripts/run_payoff.py grid --models course_pll --tasks word_order   # PLL numbers + regression
    .venv/bin/python scripts/run_payoff.py merge a.json b.json --dapt runs/dapt   # grids run in parallel, one file

Everything lands in notebooks/results/pretraining_payoff.json (``--out`` elsewhere); a killed grid resumes where it
stopped. The domain-adapted checkpoint comes from ``mlm-course pretrain --init-from course --corpus reviews ...``
(the command is stored with the results).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from mlm_course import label_efficiency as le
from mlm_course import word_order
from mlm_course.lab import label_grid
from mlm_course.lab.run_files import write_json_atomic

RESULTS = Path(__file__).resolve().parents[1] / "notebooks" / "results" / "pretraining_payoff.json"
#: the domain-adapted checkpoint of the stored results: 1,000 steps from the course checkpoint on the unlabelled
#: sentiment training sentences (never dev or test); dropout 0 and 10 % short sequences as in the checkpoint's last
#: stage, half its peak learning rate
DAPT_COMMAND = ("mlm-course pretrain --init-from course --corpus reviews --steps 1000 --lr 5e-4 --warmup-ratio 0.1 "
                "--dropout 0 --short-seq-prob 0.1 --save-every 250 --precision fp32 --out runs/dapt")


def budget(text: str) -> int | None:
    return None if text == "all" else int(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("zero-shot", "grid", "merge"))
    parser.add_argument("inputs", nargs="*", type=Path, help="merge: result files to combine into --out")
    parser.add_argument("--dapt", type=Path, default=None, help="merge: the domain-adapted run folder to describe")
    parser.add_argument("--tasks", nargs="+", default=list(le.TASKS), choices=le.TASKS)
    parser.add_argument("--models", nargs="+", default=[*label_grid.MODELS, "bow"])
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
        pairs = word_order.split("test").pairs()
        table = {}
        for key, (model, tokenizer) in label_grid.zero_shot_models().items():
            start = time.perf_counter()
            table[key] = word_order.zero_shot(model, tokenizer, pairs) | {"seconds": round(time.perf_counter() - start)}
            print(key, table[key], flush=True)
        document = label_grid.read_results(args.out)
        write_json_atomic(args.out, document | {"zero_shot": table, "zero_shot_command": command})
        return
    if args.what == "merge":
        document = label_grid.merge_results([label_grid.read_results(path) for path in args.inputs])
        document["commands"].append(command)
        if args.dapt is not None:
            losses = {key: label_grid.review_masked_lm_loss(name) for key, name in (("course", "course"), ("dapt", args.dapt))}
            document["dapt"] = label_grid.describe_run(args.dapt) | {"command": DAPT_COMMAND, "review_dev_mlm": losses}
        write_json_atomic(args.out, document)
        print(f"{len(document['rows'])} rows -> {args.out}")
        return
    sources = dict(item.split("=", 1) for item in args.source)
    label_grid.run_grid(args.out, tasks=args.tasks, models=args.models, budgets=args.budgets, seeds=args.seeds,
                        sources=sources, recipe_name=args.recipe, command=command)


if __name__ == "__main__":
    main()
