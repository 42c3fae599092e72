"""benchmarks/bench_finetune_gpu.py and benchmarks/timing.py: a fair comparison, and a tiny CPU run end to end.
(The GPU peaks the benchmark divides by are tested with the rest of precision.py, in tests/test_precision.py.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from transformers import BertConfig

from mlm_course import bert
from mlm_course.bert import BertClassifier

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_finetune_gpu as bench  # noqa: E402
import timing  # noqa: E402


def test_flops_per_token_of_bert_base_by_hand():
    h, i, layers, seq = 768, 3072, 12, 128
    weights = layers * (4 * h * h + 2 * h * i)  # Q, K, V, output and the two FFN matrices: 84.9 M
    assert weights == 84_934_656
    assert bert.flops_per_token(BertConfig(num_labels=2), seq, head_share=0.0) == 6 * weights + 12 * layers * seq * h


def test_ours_and_the_trainer_start_from_the_same_weights():
    config = BertConfig(num_labels=2, **bench.TINY)
    theirs = bench.reference(config).eval()
    ours = BertClassifier.from_transformers(bench.reference(config)).eval()
    ids = bench.synthetic(config.vocab_size, 4, 16)
    batch = torch.tensor(ids.input_ids)
    with torch.no_grad():
        torch.testing.assert_close(ours(batch), theirs(input_ids=batch).logits, rtol=0, atol=1e-5)
    assert {len(row) for row in ids.input_ids} == {16} and ids.input_ids[0][0] == 101  # no padding: tokens = b × s


def test_one_gpu_is_pinned(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1,2")
    assert timing.pin_one_gpu() == "3" and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert timing.pin_one_gpu() == "0"


def test_only_times_the_named_runs(tmp_path, one_torch_thread):
    """--only ours: our loop alone (what the GPU check does with --only ours_compiled); no speed-up without a Trainer
    run to compare with; an unknown name is refused by the parser."""
    out = tmp_path / "bench.json"
    verbosity = transformers.utils.logging.get_verbosity()
    try:
        assert bench.main(["--tiny", "--device", "cpu", "--precision", "fp32", "--only", "ours", "--out", str(out)]) == 0
    finally:
        transformers.utils.logging.set_verbosity(verbosity)
    result = json.loads(out.read_text())
    assert set(result["runs"]) == {"ours"} and result["best"] == "ours" and result["our_precision"] == "fp32"
    assert result["speedup_vs_trainer_defaults"] is None and result["speedup_vs_trainer_same_precision"] is None
    assert result["runs"]["ours"]["tokens_per_s"] == pytest.approx(8 * 32 * 4 / result["runs"]["ours"]["seconds"],
                                                                   rel=1e-3)
    assert bench.parse(["--only", "ours_compiled,trainer_defaults"]).only == ("ours_compiled", "trainer_defaults")
    with pytest.raises(SystemExit):
        bench.parse(["--only", "ours,theirs"])


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
    assert result["tokens_timed"] == 8 * 32 * 4 and result["seq_len"] == 32
    tiny = BertConfig(num_labels=2, max_position_embeddings=512, **bench.TINY)
    assert result["flops_per_token"] == bert.flops_per_token(tiny, 32, head_share=0.0)
    runs = result["runs"]
    assert result["speedup_vs_trainer_defaults"] == pytest.approx(
        runs["ours"]["tokens_per_s"] / runs["trainer_defaults"]["tokens_per_s"], abs=0.01)
    assert runs["trainer_defaults"]["precision"] == "fp32 (defaults)"
    assert runs["trainer_same_precision"]["precision"].startswith(result["our_precision"])
    assert f"precision: {result['our_precision']}" in runs["ours"]["precision"]
    if result["peak_tflops"] is None:
        assert all(run["mfu"] is None for run in runs.values())
