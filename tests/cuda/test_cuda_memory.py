"""On a GPU: benchmarks/timing.py measures each run's own memory peak."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import timing  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_peak_memory_of_a_run_does_not_include_the_previous_model():
    previous_run = [torch.empty(256, 2**20, device="cuda")]  # 1 GiB
    previous_run.append(previous_run)  # a reference cycle (as a model can hold): only gc.collect() frees it
    del previous_run
    timing.free_memory()
    assert timing.peak_memory_gib() < 0.5
