"""benchmarks/bench_lunch_break.py: runs that take turns keep their own clocks, the comparisons its report makes,
and a quick run end to end."""

import json
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_lunch_break as bench  # noqa: E402
import time_to_loss_runs as runs  # noqa: E402


def burn_thread(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_runs_take_turns_round_robin_and_each_clock_counts_only_its_own_work():
    turns = runs.Turns(["a", "b", "c"], chunk=0.02)
    order, lock = [], threading.Lock()

    def work(name: str, seconds: float):
        def run():
            start = time.thread_time()
            while time.thread_time() - start < seconds:
                with lock:
                    if not order or order[-1] != name:
                        order.append(name)
                burn_thread(0.005)
                turns.hand_over_if_due(name)
            return {"own": time.thread_time() - start}
        return run

    results = turns.run({"a": work("a", 0.1), "b": work("b", 0.1), "c": work("c", 0.04)})
    # while all three run, each turn goes to the next in order; c finishes early, then a and b alternate
    assert order[:6] == ["a", "b", "c", "a", "b", "c"]
    assert all(x != y for x, y in zip(order, order[1:], strict=False))
    assert set(order[-4:]) == {"a", "b"}
    for name, seconds in (("a", 0.1), ("b", 0.1), ("c", 0.04)):
        check = turns.clock_check(name)
        # a thread's clock is its own: the others' turns (twice as much CPU in all) are not in it
        assert seconds <= results[name]["own"] < seconds + 0.03
        assert check["thread_cpu_seconds"] == pytest.approx(results[name]["own"], abs=0.02)
        # no other thread worked during its turns: the process clock agrees with the thread's
        assert check["process_cpu_seconds"] == pytest.approx(check["thread_cpu_seconds"], abs=0.02)


def test_an_error_in_one_run_is_raised_after_the_others_finish():
    turns = runs.Turns(["ok", "broken"], chunk=0.01)
    finished = []

    def broken():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        turns.run({"ok": lambda: finished.append("ok"), "broken": broken})
    assert finished == ["ok"]


@pytest.mark.parametrize("names, chunk", [([], 1.0), (["a", "a"], 1.0), (["a"], 0.0)])
def test_turns_refuse_bad_settings(names, chunk):
    with pytest.raises(ValueError, match="distinct run names and a chunk"):
        runs.Turns(names, chunk)


def curve(*pairs: tuple[float, float]) -> list[dict]:
    return [{"cpu_seconds": t, "step": round(t), "loss": loss} for t, loss in pairs]


def test_a_comparison_reads_the_ratio_at_the_hardest_loss_both_reach_and_the_loss_after_the_same_seconds():
    fast = {"name": "fast", "train_cpu_seconds": 300.0, "curve": curve((0, 9.0), (100, 6.0), (200, 4.0), (300, 3.0))}
    slow = {"name": "slow", "train_cpu_seconds": 200.0, "curve": curve((0, 9.0), (100, 7.0), (200, 6.2))}
    result = bench.compare(slow, fast)
    # slow's best 6.2 rounds up to 6.20; fast crosses it at 100 - (6.2-6.0)/(9-6)*100 ≈ 93.3 s, slow at 200 s
    assert result["hardest_both_reach"] == 6.2
    assert result["ratio"]["6.2"]["ratio"] == pytest.approx(200 / 93.3, abs=0.01)
    # the checkpoint's 3.48: fast crosses it at 200 + (4-3.48)/(4-3)*100 = 252 s, slow never (a lower bound)
    assert result["time_to_target"]["fast"]["3.48"]["interpolated"] == pytest.approx(252.0)
    assert result["ratio"]["3.48"]["ratio"] is None and result["ratio"]["3.48"]["at_least"] == pytest.approx(0.79)
    assert result["same_cpu_seconds"] == {"cpu_seconds": 200.0, "slow": 6.2, "fast": 4.0}


def test_loss_at_takes_the_last_evaluation_not_after_the_time():
    points = curve((0, 9.0), (30, 7.0), (60, 6.0))
    assert [bench.loss_at(points, t) for t in (0, 28.9, 29.5, 58, 600)] == [9.0, 9.0, 7.0, 7.0, 6.0]
    # two runs stopped by the same budget are scored a fraction of a second apart: the same moment
    assert bench.loss_at(curve((0, 9.0), (1740.0, 4.72), (1800.15, 4.66)), 1800.07) == 4.66


def test_a_quick_run_writes_both_groups_and_the_report(tmp_path):
    bench.main(["--quick", "--work", str(tmp_path), "--group", "before", "transformers"])
    document = json.loads((tmp_path / "report.json").read_text())
    assert set(document["groups"]) == {"before", "transformers"}
    group = document["groups"]["transformers"]
    assert set(group["runs"]) == {"lunch", "transformers_tuned", "transformers_defaults"}
    for name, run in group["runs"].items():
        assert run["clock_check"]["turns"] >= 2, name  # each handed over at least once
        assert run["train_cpu_seconds"] >= run["budget_cpu_seconds"] or run["stopped"] == "schedule end"
    assert group["runs"]["transformers_defaults"]["budget_cpu_seconds"] == pytest.approx(1.5 / 6)
    assert group["runs"]["lunch"]["settings"]["steps"] == group["runs"]["lunch"]["schedule_steps_fitted"]
    assert 0 < group["lunch_mfu"]["share_of_matmul_peak"] < 1
    across = document["across_groups"]  # the recipe before against transformers, across the two processes
    assert set(across) == {"why", "transformers_tuned_over_course", "transformers_defaults_over_course", "lunch_in_each"}
    # a second invocation keeps the finished groups
    mtime = (tmp_path / "before.json").stat().st_mtime
    bench.main(["--quick", "--work", str(tmp_path), "--group", "before"])
    assert (tmp_path / "before.json").stat().st_mtime == mtime
