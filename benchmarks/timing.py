"""What the benchmarks share: one GPU only, timing steps inside transformers.Trainer, clean memory peaks, peak FLOP/s.

Import this module before torch in a benchmark script: :func:`pin_one_gpu` must run before CUDA starts.
"""

from __future__ import annotations

import gc
import os
import statistics
import time


def pin_one_gpu() -> str:
    """Make only the first visible GPU visible. Without a launcher ``transformers.Trainer`` wraps the model in
    DataParallel over every visible GPU and processes N× the tokens a single-GPU loop is credited with."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    os.environ["CUDA_VISIBLE_DEVICES"] = first
    return first


#: Dense (no sparsity) tensor-core peaks in TFLOP/s, keyed on the exact ``torch.cuda.get_device_name()``:
#: bf16 on Ampere and newer; fp16 on the V100 and T4, which have no bf16 (the datasheets' numbers).
PEAK_TFLOPS = {
    "NVIDIA H200": 989.0,  # SXM
    "NVIDIA H200 NVL": 835.0,
    "NVIDIA H100 80GB HBM3": 989.0,  # SXM
    "NVIDIA H100 NVL": 835.0,
    "NVIDIA H100 PCIe": 756.0,
    "NVIDIA GH200 480GB": 989.0,
    "NVIDIA A100-SXM4-40GB": 312.0,
    "NVIDIA A100-SXM4-80GB": 312.0,
    "NVIDIA A100-PCIE-40GB": 312.0,
    "NVIDIA A100 80GB PCIe": 312.0,
    "NVIDIA L40S": 362.0,
    "NVIDIA L40": 181.0,
    "NVIDIA L4": 121.0,
    "NVIDIA A10": 125.0,
    "Tesla V100-SXM2-16GB": 125.0,
    "Tesla V100-SXM2-32GB": 125.0,
    "Tesla V100-PCIE-16GB": 112.0,
    "Tesla V100-PCIE-32GB": 112.0,
    "Tesla T4": 65.0,
}


def peak_tflops(gpu_name: str | None, explicit: float | None = None) -> tuple[float | None, str]:
    """(peak TFLOP/s, where it comes from) for the exact GPU name; None with a reason when unknown."""
    if explicit:
        return explicit, "given with --peak-tflops"
    if gpu_name is None:
        return None, "no GPU: MFU is not reported"
    if gpu_name in PEAK_TFLOPS:
        return PEAK_TFLOPS[gpu_name], f"dense tensor-core peak of {gpu_name} ({PEAK_TFLOPS[gpu_name]:g} TFLOP/s)"
    return None, f"unknown GPU {gpu_name!r}: pass --peak-tflops for MFU"


def free_memory() -> None:
    """Collect the previous run's model (reference cycles keep it alive until ``gc.collect()``), return cached
    blocks and restart the peak counter, so each run's peak is its own."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 3) if torch.cuda.is_available() else None


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def step_clock(first: int, last: int, marks: dict[int, float]):
    """A ``transformers.TrainerCallback`` that notes the time (after a device sync) at global steps first and last."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def on_step_end(self, _args, state, control, **kwargs):
            if state.global_step in (first, last):
                sync()
                marks[state.global_step] = time.perf_counter()

    return Clock()


def seconds_between_logged_steps(metrics: list[dict], first: int, last: int) -> float:
    """Our loop's time from step ``first`` to ``last``, from its train rows (each written after a device read)."""
    times = {m["step"]: m["seconds"] for m in metrics if m["split"] == "train"}
    if first not in times or last not in times:
        raise RuntimeError(f"our loop logged steps {sorted(times)}; expected {first} and {last}")
    return times[last] - times[first]


def round_robin_medians(candidates: dict, repeats: int) -> dict[str, float]:
    """Median seconds per candidate, timing them in turn each round so a busy machine slows all alike."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(v) for name, v in times.items()}
