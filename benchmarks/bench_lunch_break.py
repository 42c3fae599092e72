"""Your own BERT in a lunch break: how low the held-out masked-LM loss gets in 30 CPU-minutes on one thread — with
the shipped checkpoint's recipe (``mlm-course pretrain``'s defaults since this benchmark), with the same recipe's
schedule fitted to the budget (the defaults before it) and with transformers — every comparison taken between runs that share one process and take turns.

    python benchmarks/bench_lunch_break.py --group transformers &   # lunch, (c) and (b), taking turns (≈ 75 min)
    python benchmarks/bench_lunch_break.py --group before           # lunch and the checkpoint's recipe (≈ 65 min)
    python benchmarks/bench_lunch_break.py --figure lunch_break.png   # only the report (and the figure)
    python benchmarks/bench_lunch_break.py --quick --work /tmp/lunch  # seconds, tiny text (CI smoke)

The recipes (one thread each, the same 128-token held-out set with frozen masks as ``bench_time_to_loss.py``, the
precision ``auto`` picks on this CPU, decided once per work folder):

* ``lunch`` — the checkpoint's rate with its schedule fitted to the budget (10 % warm-up), as
  ``--minutes --fit-schedule`` fits it (``mlm-course pretrain``'s default until this benchmark): the step count is
  the budget over the CPU-seconds of a step, timed on this thread before the run (a throw-away copy, 20 steps after
  5). It measured worse than ``course`` at 30 minutes: the rate decays while the model is still on the plateau.
* ``course`` — (a), the shipped checkpoint's recipe (its first stage: lr 3e-3, 700 warm-up steps, a 14,000-step
  schedule, batch 32 × 128, 15 % masking), stopped by the budget part-way down its decay: what
  ``mlm-course pretrain`` runs by default (``TrainConfig.pretraining``) since this benchmark.
* ``transformers_tuned`` (c) and ``transformers_defaults`` (b) — ``Trainer`` + ``BertForMaskedLM`` +
  ``DataCollatorForLanguageModeling`` as ``bench_time_to_loss.py`` defines them. (b) gets 300 CPU-seconds, not
  1,800: at its defaults it is still at 6.2 nats after 1,800 (``time_to_loss.json``), and its ratio is read at the
  hardest loss it reaches in its budget, where the course's recipe is far ahead either way.

Each run is scored at 0, every 10 CPU-seconds for its first minute, then every 60 (``time_to_loss_runs.Recorder``).

**Taking turns** (:class:`time_to_loss_runs.Turns`): the runs of a group live in threads of one process; one trains
at a time, for 30 CPU-seconds of its own thread, then hands over, round robin, until each has spent its budget. A
neighbour's job on the machine therefore slows every run of the group alike, and each run's clock is its own
thread's CPU time (``time.thread_time()``) with its evaluations taken out. Each turn records thread CPU, process CPU
and wall seconds: process CPU equal to thread CPU shows no other thread worked in the turn (the clock check), and
CPU over wall is the share of a core the run got. The load average is recorded at every evaluation.

Each group's ratios come from its own runs only; ``lunch`` runs in both groups, so its two curves also show how much
the same recipe moves between two invocations. A group is not resumable mid-way (a ``Trainer`` cannot be paused
across processes): a killed group starts again; a finished group (``<work>/<group>.json``) is never redone.

The report (``benchmarks/results/lunch_break.json``): for every run its curve, where it stopped, its load; the
targets — the shipped checkpoint's held-out loss (3.48) and, per pair, the hardest loss both runs reach (the slower
one's best, rounded up to 0.05); CPU-seconds to each, interpolated between evaluations as ``time_to_loss_report``
does; the ratio at each; the loss each run of a pair has reached after the same CPU-seconds; and the lunch recipe's
share of this CPU's matmul rate at the precision used (MFU).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from mlm_course import bert, models, precision
from mlm_course.lab.pretrain_run import DEFAULT_SIZE, PretrainConfig
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.pretraining import evaluate_masked_lm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import time_to_loss_report as report  # noqa: E402
from bench_time_to_loss import precision_choice, shared_facts  # noqa: E402
from time_to_loss_runs import (  # noqa: E402
    FULL,
    QUICK,
    SEQ_LEN,
    Recorder,
    Sizes,
    Stepper,
    Turns,
    load_data,
    matmul_rates,
    run_course,
    run_recipe,
    run_trainer,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "lunch_break.json"
WORK = ROOT / "runs" / "lunch_break"
GROUPS = {"transformers": ("lunch", "transformers_tuned", "transformers_defaults"), "before": ("lunch", "course"),
          "gpu": ("lunch", "transformers_tuned")}
RECIPES = {"lunch": "the checkpoint's rate, its schedule fitted to the budget (--minutes --fit-schedule)",
           "course": "(a) the checkpoint's recipe: lr 3e-3, 700 warm-up steps, 14,000-step schedule",
           "transformers_tuned": "(c) Trainer + BertForMaskedLM at the course's lr 3e-3, warm-up, schedule, batch",
           "transformers_defaults": "(b) Trainer + BertForMaskedLM at transformers' defaults"}
SHORTER_BUDGET = {"transformers_defaults": 1 / 6}  # of the full budget: 300 of 1,800 CPU-seconds
CHUNK = {"full": 30.0, "quick": 0.25}  # CPU-seconds of a turn
CHECKPOINT_LOSS = 3.48  # the shipped checkpoint's held-out loss (notebook 06 prints it: 3.481)


def lunch_config(chosen: str, steps: int = 1000, device: str = "cpu") -> PretrainConfig:
    """The fitted recipe as the benchmark runs it (10 % warm-up, the command's default when it was measured): on
    ``device`` in ``chosen`` precision, ``steps`` steps, no checkpoints or evaluations of its own (the recorder
    scores it)."""
    return PretrainConfig(size=DEFAULT_SIZE, precision=chosen, steps=steps, warmup_ratio=0.1, minutes=None,
                          eval_every=10**9, save_every=10**9, log_every=100, device=device, seed=0)


def device_name(device: str) -> str:
    """``cpu``, or the GPU with its name, e.g. ``cuda:0 (NVIDIA H200)``."""
    return f"{device} ({torch.cuda.get_device_name(device)})" if device != "cpu" else "cpu"


def gpu_clock() -> float:
    """Wall seconds once the GPU has finished the work queued so far (a GPU's work is not on a thread's clock)."""
    torch.cuda.synchronize()
    return time.perf_counter()


def steps_in_budget(data, config: PretrainConfig, seconds: float, clock=time.thread_time) -> int:
    """Steps of ``config`` that fit ``seconds`` on ``clock`` (this thread's CPU time): 20 steps timed after 5, on
    a copy."""
    from mlm_course.lab.pretrain_run import seeded_batches
    from mlm_course.objective import masked_lm_loss

    blocks = data.train_blocks if config.seq_len == SEQ_LEN else data.packed(config.seq_len)
    model = models.build_model(config.size, data.tokenizer, seed=1, max_positions=max(SEQ_LEN, config.seq_len),
                               dropout=config.dropout)
    stepper = Stepper(model, config.train_config(), seeded_batches(blocks, data.tokenizer, config, slots=1),
                      masked_lm_loss, device=config.device)
    for _ in range(5):
        stepper.run_step()
    start = clock()
    for _ in range(20):
        stepper.run_step()
    return max(10, int(seconds / ((clock() - start) / 20)))


def run_group(group: str, work: Path, sizes: Sizes, chunk: float, device: str = "cpu") -> dict:
    """The group's runs taking turns in one process (on a GPU: one after the other, on the GPU's clock); their
    records by name."""
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    on_gpu = device != "cpu"
    chosen = (precision.precision_name(precision.autocast_dtype(torch.device(device), "auto")) if on_gpu
              else precision_choice(work)["auto_picks"])
    data = load_data(sizes)
    turns = Turns(list(GROUPS[group]), math.inf if on_gpu else chunk)
    clock = gpu_clock if on_gpu else time.thread_time

    def recorder_for(name: str):
        budget = sizes.budget_seconds * SHORTER_BUDGET.get(name, 1.0)
        own = replace(sizes, budget_seconds=budget)
        return lambda tokens_per_step: Recorder(
            lambda m: evaluate_masked_lm(m, data.eval_batches), own, tokens_per_step=tokens_per_step, targets=None,
            partial=work / f"{group}.{name}.partial.json", clock=clock,
            between_steps=lambda: turns.hand_over_if_due(name))

    def lunch() -> dict:
        steps = steps_in_budget(data, lunch_config(chosen, device=device), sizes.budget_seconds, clock)
        return {"schedule_steps_fitted": steps} | run_recipe(data, lunch_config(chosen, steps, device),
                                                             recorder_for("lunch"))

    def trainer(name: str):
        return lambda: run_trainer(data, name, chosen, recorder_for(name), device)

    work_of = {"lunch": lunch, "course": lambda: run_course(data, sizes, chosen, "course", recorder_for("course"),
                                                            device),
               "transformers_tuned": trainer("transformers_tuned"),
               "transformers_defaults": trainer("transformers_defaults")}
    started, matmul = time.strftime("%Y-%m-%d %H:%M:%S"), None if on_gpu else matmul_rates(sizes.matmul_size)
    outcomes = turns.run({name: work_of[name] for name in GROUPS[group]})
    return {name: {"name": name, "recipe": RECIPES[name], **outcome, "clock_check": turns.clock_check(name),
                   "budget_cpu_seconds": sizes.budget_seconds * SHORTER_BUDGET.get(name, 1.0)}
            for name, outcome in outcomes.items()} | {
        "_group": {"chunk_cpu_seconds": None if on_gpu else chunk, "device": device_name(device),
                   "started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "matmul_at_start": matmul,
                   "precision": chosen}}


# ---- the report ----------------------------------------------------------------------------------------------------


def loss_at(curve: list[dict], seconds: float) -> float:
    """The held-out loss of the last evaluation at or before ``seconds`` training CPU-seconds, give or take one: two runs
    stopped by the same budget are scored a fraction of a second apart (the step in progress finishes)."""
    return min((p for p in curve if p["cpu_seconds"] <= seconds + 1.0), key=lambda p: -p["cpu_seconds"])["loss"]


def compare(slow: dict, fast: dict) -> dict:
    """``slow``'s CPU-seconds over ``fast``'s at the checkpoint's loss and at the hardest loss both reach, and the
    loss each has reached after the CPU-seconds the shorter run trained."""
    hardest = report.round_up(max(min(report.trained_losses(run)) for run in (slow, fast)))
    levels = sorted({hardest, CHECKPOINT_LOSS}, reverse=True)
    times = {run["name"]: {str(level): report.time_to(run["curve"], level) for level in levels} for run in (slow, fast)}
    shared = min(slow["train_cpu_seconds"], fast["train_cpu_seconds"])
    return {"hardest_both_reach": hardest, "time_to_target": times,
            "ratio": {str(level): report.ratio(slow, fast, level, times) for level in levels},
            "same_cpu_seconds": {"cpu_seconds": shared, slow["name"]: round(loss_at(slow["curve"], shared), 4),
                                 fast["name"]: round(loss_at(fast["curve"], shared), 4)}}


def mfu(run: dict, matmul: dict, precision_used: str, tokenizer) -> dict:
    """The run's model FLOPs per CPU-second (forward and backward, the head at the masked share of positions)
    against this CPU's one-thread matmul rate at the precision it computed in."""
    settings = run["settings"]
    config = models.build_config(settings["size"], tokenizer, max_positions=settings["seq_len"])
    flops = bert.flops_per_token(config, settings["seq_len"], head_share=settings["mask_rate"])
    achieved = run["tokens_per_cpu_second"] * flops
    peak = matmul[precision_used]["cpu_clock_tflops"] * 1e12
    return {"flops_per_token": flops, "gflops_per_cpu_second": round(achieved / 1e9, 2),
            "matmul_peak_gflops": round(peak / 1e9, 2), "precision": precision_used,
            "share_of_matmul_peak": round(achieved / peak, 3)}


def group_report(group: dict, tokenizer) -> dict:
    """One group: its runs, their facts and clock checks, each run against ``lunch``, and lunch's own figures."""
    meta, runs = group["_group"], {name: run for name, run in group.items() if not name.startswith("_")}
    lunch = runs["lunch"]
    return {**meta, "command": group.get("_command"), "runs": runs,
            "run_facts": {name: report.run_facts(run) | {"clock_check": run["clock_check"]}
                          for name, run in runs.items()},
            "over_lunch": {name: compare(run, lunch) for name, run in runs.items() if name != "lunch"},
            "lunch_time_to_checkpoint_loss": report.time_to(lunch["curve"], CHECKPOINT_LOSS),
            "lunch_loss_at_budget": lunch["curve"][-1]["loss"],
            "lunch_mfu": mfu(lunch, meta["matmul_at_start"], meta["precision"], tokenizer)
            if meta["matmul_at_start"] else None}


def across_groups(groups: dict) -> dict | None:
    """The checkpoint's recipe against transformers: runs of the two groups, which ran side by side (one process per
    core) rather than taking turns — a weaker pairing, checked by the lunch recipe that ran in both."""
    if not {"before", "transformers"} <= set(groups):
        return None
    before, other = groups["before"], groups["transformers"]
    return {"why": "the two groups ran at the same time, one process per core; the lunch recipe ran in both",
            **{f"{name}_over_course": compare(other[name], before["course"])
               for name in ("transformers_tuned", "transformers_defaults") if name in other},
            "lunch_in_each": {group: {"loss_at_budget": round(groups[group]["lunch"]["curve"][-1]["loss"], 4),
                                      "tokens_per_cpu_second": groups[group]["lunch"]["tokens_per_cpu_second"]}
                              for group in ("before", "transformers")}}


def build_report(work: Path, facts: dict, commands: dict, tokenizer) -> dict:
    groups = {path.stem: json.loads(path.read_text()) for path in sorted(work.glob("*.json")) if path.stem in GROUPS}
    return {"what": "held-out masked-LM loss against training CPU-seconds (one thread each, the runs of a group "
                    "taking turns in one process); see benchmarks/bench_lunch_break.py",
            "checkpoint_loss": CHECKPOINT_LOSS, **facts, "commands": commands,
            "groups": {group: group_report(runs, tokenizer) for group, runs in groups.items()},
            "across_groups": across_groups(groups)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", choices=list(GROUPS), nargs="+", default=[], help="groups of runs to do")
    parser.add_argument("--quick", action="store_true", help="seconds per run on a tiny text (CI smoke)")
    parser.add_argument("--work", type=Path, default=WORK, help="one JSON file per finished group")
    parser.add_argument("--out", type=Path, default=None, help="the report (default benchmarks/results/"
                                                               "lunch_break.json; with --quick, <work>/report.json)")
    parser.add_argument("--figure", type=Path, default=None, help="also save the figure (PNG)")
    parser.add_argument("--device", default="cpu", help="cpu (runs take turns on one thread) or cuda[:N] (one "
                                                        "after the other, on the GPU's clock)")
    parser.add_argument("--budget", type=float, default=None, help="seconds per run (default 1,800; quick: 1.5)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    sizes, chunk = (QUICK, CHUNK["quick"]) if args.quick else (replace(FULL, every=60.0), CHUNK["full"])
    if args.budget is not None:
        if not args.budget > 0:
            parser.error(f"--budget must be > 0 seconds, not {args.budget}")
        sizes = replace(sizes, budget_seconds=args.budget)
    args.work.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/bench_lunch_break.py " + " ".join(argv if argv is not None else sys.argv[1:])
    for group in args.group:
        path = args.work / f"{group}.json"
        if path.exists():
            print(f"{group}: finished before, kept", flush=True)
            continue
        print(f"{group}: {', '.join(GROUPS[group])}, taking turns ...", flush=True)
        write_json_atomic(path, run_group(group, args.work, sizes, chunk, args.device) | {"_command": command})
    write_report(args, sizes, command)


def write_report(args, sizes: Sizes, command: str) -> None:
    out = args.out or (args.work / "report.json" if args.quick else RESULTS)
    data = load_data(sizes)
    document = build_report(args.work, shared_facts(data, args.work), {"this invocation": command,
                                                                       "recipes": RECIPES}, data.tokenizer)
    write_json_atomic(out, document)
    print(summary(document), flush=True)
    if args.figure is not None:
        from mlm_course import plots

        plots.lunch_break_curves(document).savefig(args.figure, dpi=100)


def summary(document: dict) -> str:
    lines = []
    for group, result in document["groups"].items():
        lines.append(f"[{group}] lunch: loss {result['lunch_loss_at_budget']:.3f} at the budget; to "
                     f"{CHECKPOINT_LOSS}: {result['lunch_time_to_checkpoint_loss']}; MFU {result['lunch_mfu']}")
        for name, pair in result["over_lunch"].items():
            lines.append(f"  {name} over lunch: {pair['ratio']}  same CPU-s: {pair['same_cpu_seconds']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
