"""Run the masking-ablation grid of notebook 08 and store its results as JSON.

    python scripts/run_ablations.py --budget cpu                  # ≈ 2 CPU-minutes per run, 33 runs
    python scripts/run_ablations.py --budget long --seeds 0 1 2   # past the plateau: use a GPU
    python scripts/run_ablations.py --families mix --seeds 0 --heldout-only   # held-out loss by action only

Each finished run is kept under --work (default runs/ablations/<budget>) and skipped on a rerun, so a killed grid
continues where it stopped, and several processes can share the work (give each other --seeds). The summary
(mean ± half-width of the 95 % t-interval over seeds, with budget, hardware and wall time) goes to --out.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from mlm_course import ablations
from mlm_course.lab import ablation_grid
from mlm_course.lab.run_files import write_json_atomic

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", choices=sorted(ablation_grid.TRAINING_BUDGETS), default="cpu")
    parser.add_argument("--families", nargs="+", choices=ablations.FAMILIES, default=list(ablations.FAMILIES))
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default: the budget's seeds")
    parser.add_argument("--work", type=Path, default=None, help="where runs are kept (default runs/ablations/BUDGET)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results JSON (default notebooks/results/ablations_BUDGET.json)")
    parser.add_argument("--no-summary", action="store_true", help="only run; do not write --out")
    parser.add_argument("--heldout-only", action="store_true",
                        help="pretrain and score the held-out masks (overall and by action) only; no fine-tuning "
                             "or probe (default --out notebooks/results/ablations_BUDGET_heldout.json)")
    args = parser.parse_args(argv)

    budget = ablation_grid.TRAINING_BUDGETS[args.budget]
    if args.seeds:
        budget = replace(budget, seeds=tuple(args.seeds))
    work = args.work or ROOT / "runs" / "ablations" / budget.name
    suffix = "_heldout" if args.heldout_only else ""
    out = args.out or ROOT / "notebooks" / "results" / f"ablations_{budget.name}{suffix}.json"
    start = time.perf_counter()
    rows = ablation_grid.run_grid(budget, work, families=args.families, log=lambda line: print(line, flush=True),
                                  downstream=not args.heldout_only)
    if not args.no_summary:
        all_seeds = replace(budget, seeds=tuple(sorted({row["seed"] for row in rows})))
        command = "python scripts/run_ablations.py " + shlex.join(argv if argv is not None else sys.argv[1:])
        seconds = sum(row["seconds"]["total"] for row in rows)
        document = ablation_grid.results_document(rows, all_seeds, command=command.strip(), seconds=seconds,
                                                  families=args.families)
        document["grid_seconds_this_call"] = round(time.perf_counter() - start, 1)
        # chance and unigram levels on the same frozen held-out masks, for the figures' reference lines
        document["heldout_baselines"] = ablation_grid.heldout_baselines(ablation_grid.load_data(budget))
        write_json_atomic(out, document)
        for family in args.families:
            table = ablations.by_action_table if args.heldout_only else ablations.summary_table
            print(table(document, family), "\n", flush=True)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
