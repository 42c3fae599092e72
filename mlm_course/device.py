"""Pick the device (cuda / mps / cpu) and the autocast dtype that matches it.

nanoGPT-style: one call at the top of a notebook or script, overridable by argument or by the
``MLM_COURSE_DEVICE`` environment variable. Every branch is tested by simulating availability.
"""

from __future__ import annotations

import os
import platform
from contextlib import nullcontext
from dataclasses import dataclass

import torch

DEVICE_ENV_VAR = "MLM_COURSE_DEVICE"
_KNOWN = ("cuda", "mps", "cpu")


@dataclass(frozen=True)
class DeviceChoice:
    """The device to use and its mixed-precision setting (``autocast_dtype`` None = full fp32)."""

    device: torch.device
    autocast_dtype: torch.dtype | None
    needs_grad_scaler: bool  # fp16 autocast needs loss scaling; bf16 does not

    @property
    def type(self) -> str:
        return self.device.type

    def autocast(self):
        """A context manager: autocast in ``autocast_dtype``, or nothing when running in fp32."""
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def describe(self) -> str:
        precision = "fp32" if self.autocast_dtype is None else str(self.autocast_dtype).replace("torch.", "")
        name = self.device.type
        if name == "cuda":
            name = f"cuda ({torch.cuda.get_device_name(self.device)})"
        return f"device: {name}, precision: {precision} autocast" if self.autocast_dtype else (
            f"device: {name}, precision: fp32"
        )


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def pick_device_type(prefer: str | None = None) -> str:
    """'cuda' if available, else 'mps', else 'cpu'; ``prefer`` (or $MLM_COURSE_DEVICE) overrides."""
    prefer = prefer or os.environ.get(DEVICE_ENV_VAR) or None
    if prefer is not None:
        prefer = prefer.strip().lower()
        kind = prefer.split(":")[0]
        if kind not in _KNOWN:
            raise ValueError(f"unknown device {prefer!r}: use one of {', '.join(_KNOWN)} (or leave it unset)")
        if kind == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for but no CUDA GPU is visible; use 'cpu' or leave it unset")
        if kind == "mps" and not _mps_available():
            raise ValueError("device 'mps' was asked for but Apple's MPS is not available; use 'cpu' or leave it unset")
        return prefer
    if torch.cuda.is_available():
        return "cuda"
    if _mps_available():
        return "mps"
    return "cpu"


def autocast_dtype_for(device_type: str, *, mixed_precision: bool = True) -> torch.dtype | None:
    """bf16 where the device supports it, else fp16 (CUDA before Ampere, MPS without bf16), None on CPU."""
    kind = device_type.split(":")[0]
    if not mixed_precision or kind == "cpu":
        return None
    if kind == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if kind == "mps":
        return torch.bfloat16 if _mps_bf16_supported() else torch.float16
    raise ValueError(f"unknown device type {device_type!r}")


def _mps_bf16_supported() -> bool:
    try:
        torch.zeros(1, dtype=torch.bfloat16, device="mps")
    except (RuntimeError, TypeError):
        return False
    return True


def choose(prefer: str | None = None, *, mixed_precision: bool = True) -> DeviceChoice:
    """The device and precision to use; see :func:`pick_device_type` and :func:`autocast_dtype_for`."""
    device_type = pick_device_type(prefer)
    dtype = autocast_dtype_for(device_type, mixed_precision=mixed_precision)
    return DeviceChoice(torch.device(device_type), dtype, needs_grad_scaler=dtype is torch.float16)


def enable_tf32() -> bool:
    """Allow TF32 matmuls on Ampere or newer CUDA GPUs; returns whether it was enabled."""
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:
        torch.set_float32_matmul_precision("high")  # TF32 tensor cores for fp32 matmuls
        return True
    return False


def machine(device_type: str | None = None) -> dict:
    """Where a run happened, for results files: device, GPU name, CPU count, torch threads, platform, torch."""
    return {
        "device": device_type or pick_device_type(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "torch": torch.__version__,
    }
