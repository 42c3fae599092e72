"""Where a run computes and in which precision: the device (cuda / mps / cpu) and the autocast dtype.

``auto`` precision, in a few lines: bf16 on CUDA GPUs of compute capability ≥ 8.0 (Ampere and newer: bf16 tensor
cores), fp16 with loss scaling below; bf16 (or fp16) on Apple's MPS; on a CPU bf16 only where it has bf16
instructions *and* a short measurement in this process shows a bf16 matmul at least 1.2× faster than fp32 —
machines of the same kind differ (0.5× and 3.5× have been measured on two of the course's 2-core EPYCs).
Overridable by argument or by the ``MLM_COURSE_DEVICE`` environment variable. Every branch is tested by simulating
availability.
"""

from __future__ import annotations

import functools
import os
import platform
import time

import torch

DEVICE_ENV_VAR = "MLM_COURSE_DEVICE"
DEVICE_TYPES = ("cuda", "mps", "cpu")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # Linux /proc/cpuinfo names: bf16 matmuls in hardware
CPU_BF16_MIN_SPEEDUP = 1.2  # auto takes bf16 on a CPU only when its matmul is at least this much faster


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def device_problem(name: str) -> str | None:
    """What is wrong with device ``name`` ("cuda", "cuda:1", "mps", "cpu") on this machine, or None when it can
    be used; the sentence follows the setting's name (``--device`` or "the device")."""
    name = name.strip().lower()
    kind, _, index = name.partition(":")
    if kind not in DEVICE_TYPES or (index and not (kind == "cuda" and index.isdigit())):
        return f"must be cuda, cuda:N, mps or cpu (or unset: the best available), not {name!r}"
    if kind == "cuda" and not torch.cuda.is_available():
        return f"is {name!r} but no CUDA GPU is visible: use cpu or leave it unset"
    if kind == "mps" and not mps_available():
        return "is 'mps' but Apple's MPS is not available: use cpu or leave it unset"
    return None


def notebook_precision(device: torch.device) -> str:
    """What a notebook trains in: fp32 on a CPU, so its stored outputs reproduce on any CPU (``auto`` would pick
    bf16 on some and fp32 on others), and the device's own precision (``auto``) on a GPU."""
    return "fp32" if device.type == "cpu" else "auto"


def pick_device(prefer: str | None = None) -> torch.device:
    """``prefer`` (or $MLM_COURSE_DEVICE: "cuda", "cuda:1", "mps", "cpu"), else the best there is: cuda, then
    mps, then cpu. Under a launcher (``LOCAL_RANK`` set) a bare "cuda" is the process's own GPU."""
    prefer = (prefer or os.environ.get(DEVICE_ENV_VAR) or "").strip().lower() or None
    if prefer is None:
        prefer = "cuda" if torch.cuda.is_available() else "mps" if mps_available() else "cpu"
    problem = device_problem(prefer)
    if problem is not None:
        raise ValueError(f"the device {problem}")
    if prefer == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
    return torch.device(prefer)


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux reports them (empty elsewhere, where auto precision stays fp32)."""
    try:
        with open("/proc/cpuinfo") as handle:
            return next((set(line.split(":", 1)[1].split()) for line in handle if line.startswith("flags")), set())
    except OSError:
        return set()


@functools.cache
def cpu_bf16_speedup(size: int = 512, repeats: int = 5) -> float:
    """fp32 time / bf16 time of a ``size``² matmul on this CPU: medians of interleaved repeats, measured once."""
    a = torch.randn(size, size)
    pairs = {"fp32": (a, a.T.contiguous()), "bf16": (a.bfloat16(), a.T.contiguous().bfloat16())}
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(repeats + 1):  # the first round warms up and is dropped
        for name, (x, y) in pairs.items():
            start = time.perf_counter()
            torch.mm(x, y)
            times[name].append(time.perf_counter() - start)
    fp32, bf16 = (sorted(times[name][1:])[repeats // 2] for name in ("fp32", "bf16"))
    return fp32 / bf16


@functools.cache
def cpu_matmul_tflops(dtype: torch.dtype = torch.float32, size: int = 2048, repeats: int = 3) -> float:
    """This CPU's measured matmul rate in TFLOP/s (the best of ``repeats`` ``size``² products after a warm-up):
    the peak a CPU's model FLOP utilisation is measured against."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e12


def cuda_has_bf16(device: torch.device | None = None) -> bool:
    """bf16 tensor cores: compute capability 8.0 (Ampere) or newer. Not ``torch.cuda.is_bf16_supported()``,
    which also counts emulation and says True on a T4 or V100."""
    return tuple(torch.cuda.get_device_capability(device)) >= (8, 0)


def mps_has_bf16() -> bool:
    try:
        torch.zeros(1, dtype=torch.bfloat16, device="mps")
    except (RuntimeError, TypeError):
        return False
    return True


def auto_dtype(device: torch.device) -> torch.dtype | None:
    """What ``precision="auto"`` computes in on ``device``; None means fp32."""
    if device.type == "cuda":
        return torch.bfloat16 if cuda_has_bf16(device) else torch.float16
    if device.type == "mps":
        return torch.bfloat16 if mps_has_bf16() else torch.float16
    bf16_pays = bool(cpu_flags() & set(CPU_BF16_FLAGS)) and cpu_bf16_speedup() >= CPU_BF16_MIN_SPEEDUP
    return torch.bfloat16 if bf16_pays else None


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype of ``precision`` (auto, fp32, bf16, fp16) on ``device``; None means fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        return auto_dtype(device)
    if precision == "bf16" and device.type == "cuda" and not cuda_has_bf16(device):
        raise ValueError("this GPU has no bf16 tensor cores (compute capability < 8.0): use --precision fp16 or auto")
    if precision == "fp16" and device.type == "cpu":
        raise ValueError("fp16 autocast needs a GPU (CUDA or MPS); on a CPU use --precision fp32 (or bf16)")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def enable_tf32(device: torch.device) -> bool:
    """Let fp32 matmuls use TF32 tensor cores on Ampere or newer GPUs; returns whether it did."""
    if device.type == "cuda" and cuda_has_bf16(device):
        torch.set_float32_matmul_precision("high")
        return True
    return False


def precision_name(dtype: torch.dtype | None) -> str:
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def describe(device: torch.device, dtype: torch.dtype | None) -> str:
    """One line, e.g. "device: cuda:0 (NVIDIA H200), precision: bf16 autocast"."""
    name = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)
    if dtype is None:
        return f"device: {name}, precision: fp32"
    scaling = " + loss scaling" if dtype is torch.float16 else ""
    return f"device: {name}, precision: {precision_name(dtype)} autocast{scaling}"


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
        return explicit, "given"
    if gpu_name is None:
        return None, "no GPU: MFU is not reported"
    if gpu_name in PEAK_TFLOPS:
        return PEAK_TFLOPS[gpu_name], f"dense tensor-core peak of {gpu_name} ({PEAK_TFLOPS[gpu_name]:g} TFLOP/s)"
    return None, f"unknown GPU {gpu_name!r}: give its dense peak for MFU"


def peak_for(device: torch.device, dtype: torch.dtype | None) -> float | None:
    """The peak TFLOP/s of the precision a run computed in (None: fp32, autocast off): a known GPU's dense bf16 /
    fp16 tensor-core peak, and none in fp32 (:data:`PEAK_TFLOPS` holds no fp32 peaks); a CPU's matmul rate in that
    dtype, measured now (:func:`cpu_matmul_tflops`)."""
    if device.type == "cuda":
        return peak_tflops(torch.cuda.get_device_name(device))[0] if dtype is not None else None
    return cpu_matmul_tflops(dtype or torch.float32) if device.type == "cpu" else None


def utilisation(flops_per_token: float, tokens: int, seconds: float, device: torch.device,
                dtype: torch.dtype | None) -> tuple[float, float | None]:
    """(tokens per second, model FLOP utilisation): the FLOPs the model did per second (``flops_per_token``, e.g.
    :func:`mlm_course.bert.flops_per_token`, times tokens per second) over the peak of the precision the run
    computed in (:func:`peak_for`); None where the peak is unknown."""
    rate = tokens / seconds
    peak = peak_for(device, dtype)
    return rate, (flops_per_token * rate / 1e12 / peak if peak else None)


def machine(device: torch.device | None = None) -> dict:
    """Where a run happened, for results files: device, GPU name, CPU count, torch threads, platform, torch."""
    device = device or pick_device()
    return {
        "device": device.type,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "torch": torch.__version__,
    }
