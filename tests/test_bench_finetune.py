"""benchmarks/bench_finetune_gpu.py runs end to end at a tiny size on the CPU and reports what it promises."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_finetune_gpu as bench  # noqa: E402


def test_flops_per_token_of_bert_base_is_6n_plus_attention():
    from transformers import BertConfig

    model = bench.build(BertConfig(num_labels=2))
    n = bench.matmul_parameters(model)
    assert 85_000_000 < n < 86_000_000  # bert-base without its 23.8 M embedding weights
    assert bench.flops_per_token(model, 128) == 6 * n + 12 * 12 * 128 * 768


def test_peak_is_stated_or_absent():
    assert bench.peak_tflops(500.0) == (500.0, "given with --peak-tflops")
    peak, note = bench.peak_tflops(None)
    assert (peak is None) == ("no GPU" in note or "unknown GPU" in note)


@pytest.mark.slow
def test_tiny_cpu_run_reports_both_loops(tmp_path):
    out = tmp_path / "bench.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "benchmarks/bench_finetune_gpu.py", "--tiny", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["runs"]) == {"trainer", "ours"}
    for run in result["runs"].values():
        assert run["tokens_per_s"] > 0 and run["seconds"] > 0
        assert run["tokens_per_s"] == pytest.approx(result["tokens_timed"] / run["seconds"], rel=1e-3)
    assert result["tokens_timed"] == 8 * 32 * 4 and result["seq"] == 32
    assert result["speedup_vs_trainer"] == pytest.approx(
        result["runs"]["ours"]["tokens_per_s"] / result["runs"]["trainer"]["tokens_per_s"], abs=0.01)
    if result["peak_tflops"] is None:
        assert all(run["mfu"] is None for run in result["runs"].values())
