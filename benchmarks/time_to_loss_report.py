"""The report of ``bench_time_to_loss.py``: targets from (c)'s curve, CPU-seconds to each target per run, the
ratios the goals ask about, throughput against this CPU's matmul rate. Pure functions of the finished runs' files.

Targets: the three multiples of 0.5 nats just above (c)'s best held-out loss within its budget (and below its first
evaluation after step 0), and that best rounded up to 0.05 — so (c) reaches every one; plus (b)'s best, rounded up
to 0.05, when (b) improved on its first evaluation and the level is not already a target. (c) is
``transformers_tuned`` (lr 3e-3, the course's schedule) unless it diverged (a loss that is not finite, or a last
loss 0.5 nats above its best), then ``transformers_tuned_lr1e-3``.

The time to a target is the first evaluation at or below it (``first_evaluation``) and the crossing interpolated
linearly between that evaluation and the one before (``interpolated``); ratios use the interpolated times. A run
that never reaches a target gives a lower bound on its ratio: its training CPU-seconds at the stop.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

REFERENCE, ALTERNATIVE, DEFAULTS, COURSE = ("transformers_tuned", "transformers_tuned_lr1e-3",
                                            "transformers_defaults", "course")
GOAL_VS_TUNED, GOAL_VS_DEFAULTS, GOAL_PEAK_SHARE, GOAL_VS_TRANSFORMERS_MODEL = 2.0, 10.0, 0.60, 1.0


def finished_runs(work: Path) -> dict[str, dict]:
    runs = {}
    for path in sorted(Path(work).glob("*.json")):
        if not path.name.endswith(".partial.json") and path.stem not in ("precision", "time_to_loss"):
            runs[path.stem] = json.loads(path.read_text())
    return runs


def trained_losses(record: dict) -> list[float]:
    return [point["loss"] for point in record["curve"] if point["step"] > 0]


def diverged(record: dict) -> bool:
    losses = trained_losses(record)
    return not all(math.isfinite(loss) for loss in losses) or losses[-1] > min(losses) + 0.5


def reference_name(runs: dict[str, dict]) -> str | None:
    """The run whose curve sets the targets: (c) at lr 3e-3, or at 1e-3 if 3e-3 diverged; None until known."""
    if REFERENCE not in runs:
        return None
    if not diverged(runs[REFERENCE]):
        return REFERENCE
    return ALTERNATIVE if ALTERNATIVE in runs else None


def round_up(loss: float, step: float = 0.05) -> float:
    return round(math.ceil(loss / step - 1e-9) * step, 2)


def targets_from(tuned: dict, defaults: dict | None) -> list[dict]:
    """Target levels, highest (easiest) first, each with where it comes from."""
    losses = trained_losses(tuned)
    first, best = min(losses[0], tuned["curve"][0]["loss"]), round_up(min(losses))
    halves = [k / 2 for k in range(math.floor(best * 2) + 1, math.ceil(first * 2)) if best + 0.1 < k / 2 < first]
    targets = [{"loss": level, "source": "(c) reaches it"} for level in halves[:3]]
    targets.append({"loss": best, "source": "(c)'s best within its budget, rounded up to 0.05"})
    if defaults is not None:
        b_losses = trained_losses(defaults)
        level = round_up(min(b_losses))
        if level < b_losses[0] and all(abs(level - t["loss"]) > 1e-9 for t in targets):
            targets.append({"loss": level, "source": "(b)'s best within its budget, rounded up to 0.05"})
    return sorted(targets, key=lambda t: -t["loss"])


def stopping_targets(work: Path) -> list[float] | None:
    """The final target levels once (b) and (c) have finished (an ablation may then stop when it has reached
    them all); None before, and the run goes on to its budget."""
    runs = finished_runs(work)
    reference = reference_name(runs)
    if reference is None or DEFAULTS not in runs:
        return None
    return [t["loss"] for t in targets_from(runs[reference], runs[DEFAULTS])]


def time_to(curve: list[dict], level: float) -> dict | None:
    """CPU-seconds until the held-out loss first reaches ``level``, or None if it never does."""
    for index, point in enumerate(curve):
        if point["loss"] <= level:
            crossing = point["cpu_seconds"]
            if index:
                before = curve[index - 1]
                share = (before["loss"] - level) / (before["loss"] - point["loss"])
                crossing = before["cpu_seconds"] + share * (point["cpu_seconds"] - before["cpu_seconds"])
            return {"first_evaluation": point["cpu_seconds"], "interpolated": round(crossing, 1),
                    "step": point["step"]}
    return None


def ratio(slow: dict, fast: dict, level: float, times: dict) -> dict:
    """slow's CPU-seconds to ``level`` over fast's: a value, a lower bound (slow never got there), or nothing."""
    mine, theirs = times[slow["name"]][str(level)], times[fast["name"]][str(level)]
    if theirs is None or theirs["interpolated"] == 0:
        return {"ratio": None, "why": f"{fast['name']} does not reach it" if theirs is None else "reached untrained"}
    if mine is None:
        return {"ratio": None, "at_least": round(slow["train_cpu_seconds"] / theirs["interpolated"], 2),
                "why": f"{slow['name']} does not reach it in {slow['train_cpu_seconds']:.0f} CPU-s"}
    return {"ratio": round(mine["interpolated"] / theirs["interpolated"], 2)}


def throughput(runs: dict[str, dict], chosen: str) -> dict | None:
    """Tokens per CPU-second of (a) and of transformers' model in the same runner, (a)'s FLOP/s against the
    matmul rate at the precision (a) used (both on the CPU clock, one thread)."""
    timed = runs.get("throughput")
    if timed is None:
        return None
    tokens = timed["tokens_per_cpu_second"]
    peak = timed["matmul_at_start"][chosen]["cpu_clock_tflops"] * 1e12
    achieved = tokens["course"] * timed["flops_per_token"]["sparse (15 % of positions)"]
    result = {"tokens_per_cpu_second": tokens, "course_flops_per_cpu_second": round(achieved / 1e9, 2),
              "matmul_peak_gflops_at_precision_used": round(peak / 1e9, 2), "precision_used": chosen,
              "share_of_matmul_peak": round(achieved / peak, 3),
              "course_vs_transformers_in_same_runner": round(tokens["course"] / tokens["transformers_in_course_loop"], 2),
              "same_work_ours_vs_transformers": round(tokens["ours_doing_transformers_work"]
                                                      / tokens["transformers_in_course_loop"], 2)}
    if COURSE in runs:
        long_run = runs[COURSE]["tokens_per_cpu_second"] * timed["flops_per_token"]["sparse (15 % of positions)"]
        result["course_30_minute_run_share_of_matmul_peak"] = round(long_run / peak, 3)
    return result


def ratio_or_bound(entry: dict) -> float:
    """The ratio, else its lower bound (the slower run never got there), else 0 (the course never got there)."""
    return entry["ratio"] if entry["ratio"] is not None else entry.get("at_least", 0.0)


def goals(document: dict) -> dict:
    """Each goal of the issue with its measured value and whether it is met (those whose runs have finished)."""
    result, ratios, reference = {}, document["ratios"], document["reference_for_targets"]
    c_levels = [str(t["loss"]) for t in document["targets"] if t["source"].startswith("(c)")]
    if f"{reference}_over_course" in ratios:
        worst = min(ratio_or_bound(ratios[f"{reference}_over_course"][level]) for level in c_levels)
        result["time_to_target_vs_tuned"] = {"goal": f">= {GOAL_VS_TUNED}x at every (c) target ({reference})",
                                             "smallest_ratio": worst, "met": worst >= GOAL_VS_TUNED}
    if f"{DEFAULTS}_over_course" in ratios:
        defaults = ratios[f"{DEFAULTS}_over_course"]
        reached = [level for level in defaults if document["time_to_target"][DEFAULTS][level] is not None]
        result["time_to_target_vs_defaults"] = {
            "goal": f">= {GOAL_VS_DEFAULTS}x at every target (b) reaches; a target (b) never reaches counts as met",
            "targets_defaults_reaches": reached, "ratios": defaults,
            "met": all(ratio_or_bound(defaults[level]) >= GOAL_VS_DEFAULTS for level in reached)}
    speed = document.get("throughput")
    if speed:
        share, value = speed["share_of_matmul_peak"], speed["course_vs_transformers_in_same_runner"]
        result["share_of_matmul_peak"] = {"goal": f">= {GOAL_PEAK_SHARE} at {speed['precision_used']}",
                                          "value": share, "met": share >= GOAL_PEAK_SHARE}
        result["tokens_per_second_vs_transformers_model"] = {
            "goal": f">= {GOAL_VS_TRANSFORMERS_MODEL}x BertForMaskedLM in the same runner", "value": value,
            "met": value >= GOAL_VS_TRANSFORMERS_MODEL}
    return result


def ratio_table(runs: dict[str, dict], targets: list[dict], times: dict) -> dict:
    """``<slow>_over_<fast>`` per target: every run against (a), and (c) in Trainer against (c) in our runner."""
    levels = [t["loss"] for t in targets]
    pairs = [(name, COURSE) for name in runs if name != COURSE] + [(REFERENCE, "transformers_in_course_loop")]
    return {f"{slow}_over_{fast}": {str(level): ratio(runs[slow], runs[fast], level, times) for level in levels}
            for slow, fast in pairs if slow in runs and fast in runs}


def run_facts(run: dict) -> dict:
    """One line per run: how far it got, how fast it trained, how busy the machine was while it ran."""
    loads = sorted(point["load1"] for point in run["curve"])
    return {"stopped": run["stopped"], "train_cpu_seconds": run["train_cpu_seconds"], "steps": run["steps"],
            "tokens_per_cpu_second": run["tokens_per_cpu_second"], "best_loss": round(min(trained_losses(run)), 4),
            "last_loss": round(run["curve"][-1]["loss"], 4),
            "load_average_1min": {"min": loads[0], "median": loads[len(loads) // 2], "max": loads[-1]},
            "cpu_share_of_wall": round((run["train_cpu_seconds"] + run["eval_cpu_seconds"]) / run["wall_seconds"], 2)}


def build(work: Path, facts: dict, budget_seconds: float, commands: dict) -> dict:
    """The report document from the runs in ``work``."""
    runs = finished_runs(work)
    reference = reference_name(runs)
    targets = targets_from(runs[reference], runs.get(DEFAULTS)) if reference else []
    curves = {name: run for name, run in runs.items() if "curve" in run}
    times = {name: {str(t["loss"]): time_to(run["curve"], t["loss"]) for t in targets} for name, run in curves.items()}
    document = {"what": "CPU-seconds (training only, one thread, evaluation excluded) until the held-out masked-LM "
                        "loss first reaches each target, per recipe; see benchmarks/bench_time_to_loss.py",
                "budget_cpu_seconds": budget_seconds, "reference_for_targets": reference, "targets": targets,
                **facts, "commands": commands, "time_to_target": times,
                "ratios": ratio_table(curves, targets, times) if targets and COURSE in runs else {},
                "run_facts": {name: run_facts(run) for name, run in curves.items()},
                "throughput": throughput(runs, facts["precision_choice"]["auto_picks"]), "runs": runs}
    document["goals"] = goals(document)
    return document


def summary(document: dict) -> str:
    """A plain-text table: CPU-seconds to each target per run, then the goals."""
    levels = [str(t["loss"]) for t in document["targets"]]
    lines = ["run".ljust(28) + "".join(f"{level:>8}" for level in levels) + "   tok/CPU-s  best  stop"]
    for name, times in document["time_to_target"].items():
        cells = "".join(f"{t['interpolated']:>8.0f}" if t else f"{'-':>8}" for t in times.values())
        run = document["run_facts"][name]
        lines.append(name.ljust(28) + cells + f"  {run['tokens_per_cpu_second']:>10,.0f}  {run['best_loss']:.2f}"
                     f"  {run['stopped']} at {run['train_cpu_seconds']:.0f} s")
    lines += [f"{name}: {goal}" for name, goal in document["goals"].items()]
    return "\n".join(lines)
