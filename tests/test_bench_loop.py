"""benchmarks/bench_loop.py: the rates are tokens over this process's CPU time, each candidate timed once per
round in turn, and a quick run end to end writes the ratio of the loop to the command line's for both tasks."""

import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_loop as bench  # noqa: E402


def test_rates_are_tokens_per_cpu_second_in_alternating_rounds():
    order = []

    def spend(name, seconds, tokens):
        def run():
            order.append(name)
            end = time.process_time() + seconds
            while time.process_time() < end:
                pass
            return tokens
        return run

    result = bench.tokens_per_cpu_second({"a": spend("a", 0.05, 1000), "b": spend("b", 0.1, 1000)}, rounds=3)
    assert order == ["a", "b"] * 3
    rates = result["tokens_per_cpu_second"]
    assert rates["a"] == pytest.approx(20_000, rel=0.2) and rates["b"] == pytest.approx(10_000, rel=0.2)
    assert result["load_average_1min"]["min"] <= result["load_average_1min"]["max"]


@pytest.mark.slow
def test_a_quick_run_compares_the_loop_with_the_command_lines_for_both_tasks(tmp_path):
    out = tmp_path / "loop.json"
    assert bench.main(["--quick", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    for task, candidates in (("pretraining (tiny, 32 x 128)", {"accelerate", "train"}),
                             ("fine-tuning (the course checkpoint, 32 sentences)", {"accelerate", "train", "trainer"})):
        rates = document[task]["tokens_per_cpu_second"]
        assert set(rates) == candidates and all(rate > 0 for rate in rates.values())
        assert document[task]["train_over_accelerate"] == pytest.approx(rates["train"] / rates["accelerate"], rel=1e-2)
    fine_tuning = document["fine-tuning (the course checkpoint, 32 sentences)"]
    rates = fine_tuning["tokens_per_cpu_second"]
    assert fine_tuning["accelerate_over_trainer"] == pytest.approx(rates["accelerate"] / rates["trainer"], rel=1e-2)
