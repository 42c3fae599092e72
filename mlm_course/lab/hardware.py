"""The Accelerator of a command's run: its device and precision; the model compiled or not; a line that says what
they are.

Accelerate does the rest — several processes under ``accelerate launch`` (DDP over NCCL on GPUs, gloo on CPUs),
autocast and fp16 loss scaling, the model's placement — inside the lessons' loop,
:func:`mlm_course.train.train_with_accelerate`.
"""

from __future__ import annotations

import torch

from mlm_course.precision import describe, enable_tf32, pick_device
from mlm_course.train import ACCELERATE_NAMES, mixed_precision

DTYPES = {name: dtype for dtype, name in ACCELERATE_NAMES.items()}  # Accelerate's name → autocast dtype


def accelerator_for(precision: str, device: str | None = None):
    """The Accelerator of a run in ``precision`` (auto, fp32, bf16, fp16: :func:`mlm_course.train.mixed_precision`)
    on ``device`` (default: the best available; under a launcher, each process's own); TF32 matrix products on
    CUDA. Accelerate holds one precision and device per process: a second run that asks for another in the same
    process (a notebook kernel) is refused with what to do."""
    from accelerate import Accelerator

    place = pick_device(device)
    mixed = mixed_precision(precision, place)
    try:
        accelerator = Accelerator(mixed_precision=mixed, cpu=place.type == "cpu")
    except ValueError as exc:
        if "already been initialized" not in str(exc):
            raise
        from accelerate.state import AcceleratorState

        state = AcceleratorState()
        raise ValueError(f"this Python process already trains with Accelerate in {state.mixed_precision} on "
                         f"{state.device}, and Accelerate keeps one precision and device per process: run this with "
                         f"precision and device that match, or in a new process (restart the notebook's kernel)"
                         ) from exc
    enable_tf32(accelerator.device)
    return accelerator


def describe_accelerator(accelerator, compile: bool = False) -> str:
    """``device: cpu, precision: fp32, processes: 1, torch.compile: off`` — what a run computes on, as results
    files record it."""
    device = accelerator.device
    tf32 = torch.get_float32_matmul_precision() != "highest"
    tf32 = f", TF32 {'on' if tf32 else 'off'}" if device.type == "cuda" else ""
    return (f"{describe(device, DTYPES[accelerator.mixed_precision])}, processes: {accelerator.num_processes}{tf32}, "
            f"torch.compile: {'on' if compile else 'off'}")


def compiled(model: torch.nn.Module, compile: bool) -> torch.nn.Module:
    """``model`` in fp32 (autocast does the rest, whatever a checkpoint stored), compiled by ``torch.compile`` with
    static shapes when ``compile`` (a run pads its batches to few shapes, so it compiles few times)."""
    model = model.float()
    return torch.compile(model, dynamic=False) if compile else model
