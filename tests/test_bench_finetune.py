"""benchmarks/bench_finetune_gpu.py and benchmarks/timing.py: a fair comparison, and a tiny CPU run end to end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_finetune_gpu as bench  # noqa: E402
import timing  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check  # noqa: E402


def test_flops_per_token_of_bert_base_by_hand():
    from transformers import BertConfig

    h, i, layers, seq = 768, 3072, 12, 128
    weights = layers * (4 * h * h + 2 * h * i)  # Q, K, V, output and the two FFN matrices: 84.9 M
    assert weights == 84_934_656
    assert bench.flops_per_token(BertConfig(num_labels=2), seq) == 6 * weights + 12 * layers * seq * h


@pytest.mark.parametrize(("name", "peak"), [
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 NVL", 835.0), ("NVIDIA H100 PCIe", 756.0),
    ("NVIDIA H200", 989.0), ("NVIDIA H200 NVL", 835.0), ("NVIDIA L40", 181.0), ("NVIDIA L4", 121.0),
    ("NVIDIA L40S", 362.0), ("NVIDIA A100-SXM4-80GB", 312.0),
])
def test_peak_is_looked_up_by_the_exact_gpu_name(name, peak):
    assert timing.peak_tflops(name) == (peak, f"dense tensor-core peak of {name} ({peak:g} TFLOP/s)")


def test_unknown_or_missing_gpu_has_no_peak():
    assert timing.peak_tflops("NVIDIA H100 SXM5 prototype")[0] is None  # no substring guessing
    assert timing.peak_tflops(None) == (None, "no GPU: MFU is not reported")
    assert timing.peak_tflops("anything", 500.0) == (500.0, "given with --peak-tflops")


def test_one_gpu_is_pinned(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1,2")
    assert timing.pin_one_gpu() == "3" and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert timing.pin_one_gpu() == "0"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_peak_memory_of_a_run_does_not_include_the_previous_model():
    previous_run = [torch.empty(256, 2**20, device="cuda")]  # 1 GiB
    previous_run.append(previous_run)  # a reference cycle (as a model can hold): only gc.collect() frees it
    del previous_run
    timing.free_memory()
    assert timing.peak_memory_gib() < 0.5


@pytest.mark.slow
def test_tiny_cpu_run_reports_ours_and_trainer_at_both_settings(tmp_path):
    out = tmp_path / "bench.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "benchmarks/bench_finetune_gpu.py", "--tiny", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["runs"]) == {"trainer_defaults", "trainer_same_precision", "ours"}
    for run in result["runs"].values():
        assert run["tokens_per_s"] > 0 and run["seconds"] > 0
        assert run["tokens_per_s"] == pytest.approx(result["tokens_timed"] / run["seconds"], rel=1e-3)
    assert result["tokens_timed"] == 8 * 32 * 4 and result["seq"] == 32
    runs = result["runs"]
    assert result["speedup_vs_trainer_defaults"] == pytest.approx(
        runs["ours"]["tokens_per_s"] / runs["trainer_defaults"]["tokens_per_s"], abs=0.01)
    assert runs["trainer_defaults"]["precision"] == "fp32 (defaults)"
    assert runs["trainer_same_precision"]["precision"].startswith(result["our_precision"])
    if result["peak_tflops"] is None:
        assert all(run["mfu"] is None for run in runs.values())


@pytest.mark.slow
def test_gpu_check_dry_run_writes_every_step(tmp_path):
    """scripts/gpu_check.py --dry-run: every step of the GPU check at tiny sizes on the CPU, one JSON."""
    out = tmp_path / "gpu_check.json"
    # cuda_tests runs pytest in a subprocess: left out here (this is pytest), run by `bash scripts/gpu_check.sh --dry-run`
    assert gpu_check.main(["--dry-run", "--skip", "cuda_tests", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    steps = result["steps"]
    assert result["dry_run"] is True and result["device"]["torch"] == torch.__version__
    assert steps["cuda_tests"]["skipped"] == "--skip"
    assert {"course", "minilm"} <= set(steps["finetune_bf16"]) and steps["finetune_bf16"]["ok"]
    assert "bfloat16" in steps["finetune_bf16"]["course"]["precision"]
    assert set(steps["throughput"]["runs"]) == {"trainer_defaults", "trainer_same_precision", "ours"}
    assert steps["pretrain_small"]["steps"] == 3 and steps["pretrain_small"]["tokens_per_second"] > 0
    assert "needs two" in steps["two_processes"]["skipped"]


def test_noise_band_of_two_accuracies():
    row = gpu_check.within_noise(0.80, 0.79, 1057)  # SE of one accuracy on 1,057 sentences ≈ 0.0124
    assert row["band_95"] == pytest.approx(1.96 * (2 * 0.795 * 0.205 / 1057) ** 0.5, abs=1e-4) == 0.0345
    assert row["within_noise"] and not gpu_check.within_noise(0.85, 0.79, 1057)["within_noise"]
