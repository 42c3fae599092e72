"""Pick the device (cuda / mps / cpu), the autocast dtype that matches it, and the ``accelerate.Accelerator``.

nanoGPT-style: one call at the top of a notebook or script, overridable by argument or by the
``MLM_COURSE_DEVICE`` environment variable. ``auto`` precision: bf16 on GPUs of compute capability ≥ 8.0, fp16 +
loss scaling on older GPUs; on a CPU bf16 only where it has bf16 instructions (AVX512-BF16 or AMX) *and* a
bf16 matmul measures faster than fp32 there, fp32 otherwise. Every branch is tested by simulating availability.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch

DEVICE_ENV_VAR = "MLM_COURSE_DEVICE"
_KNOWN = ("cuda", "mps", "cpu")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: CPU feature flags (Linux /proc/cpuinfo names) whose presence means bf16 matmuls run in hardware.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: ``auto`` takes bf16 on a CPU only when its bf16 matmul is at least this many times faster than fp32.
CPU_BF16_MIN_SPEEDUP = 1.2


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


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux reports them (empty elsewhere, where auto precision stays fp32)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_has_bf16() -> bool:
    """True when the CPU reports bf16 instructions (AVX512-BF16 or AMX)."""
    return bool(cpu_flags() & set(CPU_BF16_FLAGS))


@functools.cache
def cpu_bf16_speedup(size: int = 512, repeats: int = 5) -> float:
    """fp32 time / bf16 time of a ``size``² matmul on this CPU: medians of interleaved repeats, measured once.

    The flags alone do not say bf16 pays: on the course's 2-core AVX512-BF16 EPYC, oneDNN's bf16 matmul runs at
    about 0.5–0.6× fp32 and a small BERT pretrains about 20 % slower under bf16 autocast (benchmarks/results/pretraining.json).
    """
    a = torch.randn(size, size)
    pair = {"fp32": (a, a.T.contiguous()), "bf16": (a.bfloat16(), a.T.contiguous().bfloat16())}
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(repeats + 1):  # the first round warms up and is dropped
        for name, (x, y) in pair.items():
            start = time.perf_counter()
            torch.mm(x, y)
            times[name].append(time.perf_counter() - start)
    median = lambda values: sorted(values[1:])[repeats // 2]  # noqa: E731
    return median(times["fp32"]) / median(times["bf16"])


def cpu_bf16_pays() -> bool:
    """bf16 instructions present and measured ≥ :data:`CPU_BF16_MIN_SPEEDUP` × faster than fp32 (flags first).

    Each process measures for itself: for several CPU processes near the threshold, pass the precision explicitly."""
    return cpu_has_bf16() and cpu_bf16_speedup() >= CPU_BF16_MIN_SPEEDUP


def cuda_has_bf16(index: int | None = None) -> bool:
    """bf16 tensor cores: compute capability 8.0 (Ampere) or newer.

    Not ``torch.cuda.is_bf16_supported()``: in torch 2.13 it also counts emulation and says True on T4 / V100.
    """
    return tuple(torch.cuda.get_device_capability(index)) >= (8, 0)


def autocast_dtype_for(device_type: str) -> torch.dtype | None:
    """The ``auto`` choice: bf16 where the hardware has it (and, on a CPU, it measures faster), fp16 on CUDA before
    Ampere, None (fp32) otherwise."""
    kind = device_type.split(":")[0]
    if kind == "cpu":
        return torch.bfloat16 if cpu_bf16_pays() else None
    if kind == "cuda":
        return torch.bfloat16 if cuda_has_bf16() else torch.float16
    if kind == "mps":
        return torch.bfloat16 if _mps_bf16_supported() else torch.float16
    raise ValueError(f"unknown device type {device_type!r}")


def precision_dtype(device_type: str, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype for ``precision`` (auto, fp32, bf16, fp16) on ``device_type``; None means fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    kind = device_type.split(":")[0]
    if precision == "auto":
        return autocast_dtype_for(device_type)
    if precision == "fp32":
        return None
    if precision == "bf16":
        if kind == "cuda" and not cuda_has_bf16():
            raise ValueError("this GPU has no bf16 tensor cores (compute capability < 8.0): use --precision fp16 or auto")
        return torch.bfloat16
    if kind == "cpu":
        raise ValueError("fp16 autocast needs a GPU (CUDA or MPS); on a CPU use --precision fp32 (or bf16)")
    return torch.float16


def _mps_bf16_supported() -> bool:
    try:
        torch.zeros(1, dtype=torch.bfloat16, device="mps")
    except (RuntimeError, TypeError):
        return False
    return True


def choose(prefer: str | None = None, *, precision: str = "auto") -> DeviceChoice:
    """The device and precision to use; see :func:`pick_device_type` and :func:`precision_dtype`."""
    device_type = pick_device_type(prefer)
    dtype = precision_dtype(device_type, precision)
    return DeviceChoice(torch.device(device_type), dtype, needs_grad_scaler=dtype is torch.float16)


def make_accelerator(device: str | None = None, precision: str = "auto", *, grad_accum: int = 1):
    """An ``accelerate.Accelerator`` for ``device`` (default: the best available) and ``precision`` (see
    :func:`precision_dtype`): batches copied without waiting on CUDA; under ``accelerate launch`` each process
    gets its own GPU.

    accelerate keeps one state per process: a second accelerator with other settings would silently keep the
    first one's device (a CPU one made before, say), so a single process starts the state afresh when it differs.
    """
    from accelerate import Accelerator, DataLoaderConfiguration, PartialState
    from accelerate.state import AcceleratorState

    kind = pick_device_type(device).split(":")[0]
    mixed = {None: "no", torch.bfloat16: "bf16", torch.float16: "fp16"}[precision_dtype(kind, precision)]
    if PartialState._shared_state and PartialState().num_processes == 1:
        cpu_before = PartialState._shared_state.get("_cpu")
        mixed_before = AcceleratorState._shared_state.get("_mixed_precision", mixed)
        if cpu_before != (kind == "cpu") or mixed_before != mixed:
            AcceleratorState._reset_state(reset_partial_state=True)
    return Accelerator(cpu=kind == "cpu", mixed_precision=mixed, gradient_accumulation_steps=grad_accum,
                       dataloader_config=DataLoaderConfiguration(non_blocking=kind == "cuda"))


def describe_accelerator(accelerator, *, tf32: bool = False, compiled: bool = False) -> str:
    """One line: device, precision, processes, TF32, torch.compile."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(str(accelerator.mixed_precision))
    line = DeviceChoice(accelerator.device, dtype, dtype is torch.float16).describe()
    if dtype is torch.float16:
        line += " + loss scaling"
    if accelerator.device.type == "cuda":
        line += f", TF32 {'on' if tf32 else 'off'}"
    return f"{line}, processes: {accelerator.num_processes}, torch.compile: {'on' if compiled else 'off'}"


def lean_batch(batch: dict[str, torch.Tensor], *, sdpa: bool = True) -> dict[str, torch.Tensor]:
    """A batch ready for the device, checked on the host: an attention mask without padding is left out, and
    with SDPA attention a padded one becomes the 4-D boolean mask transformers would build (it checks a 2-D mask
    with ``mask.all()`` on the device, a wait for the GPU at every step)."""
    mask = batch.get("attention_mask")
    if mask is None or mask.dim() != 2:
        return batch
    batch = dict(batch)
    if bool(mask.all()):
        del batch["attention_mask"]
    elif sdpa:
        batch["attention_mask"] = mask.bool()[:, None, None, :]
    return batch


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Tensors onto ``device``; on CUDA through pinned memory without waiting (``non_blocking``)."""
    if device.type != "cuda":
        return {k: v.to(device) for k, v in batch.items()}
    return {k: (v.pin_memory() if v.device.type == "cpu" else v).to(device, non_blocking=True) for k, v in batch.items()}


def enable_tf32() -> bool:
    """Allow TF32 matmuls on Ampere or newer CUDA GPUs; returns whether it was enabled."""
    if torch.cuda.is_available() and cuda_has_bf16():
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
