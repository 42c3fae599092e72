"""What the benchmarks share: one GPU only, timing steps inside transformers.Trainer, clean memory peaks.

Import this module before torch in a benchmark script: :func:`pin_one_gpu` must run before CUDA starts.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
from pathlib import Path


def pin_one_gpu() -> str:
    """Make only the first visible GPU visible. Without a launcher ``transformers.Trainer`` wraps the model in
    DataParallel over every visible GPU and processes N× the tokens a single-GPU loop is credited with."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    os.environ["CUDA_VISIBLE_DEVICES"] = first
    return first


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


def save_results(result: dict, out: Path | None, default: Path, *, smoke: bool) -> Path | None:
    """Write ``result`` as JSON to ``out``, else to ``default`` unless this is a smoke run (whose numbers are not
    kept); returns where it went."""
    out = out or (None if smoke else default)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    return out
