"""Every branch of device and precision selection (mlm_course.precision), with availability simulated by
monkeypatching torch: CUDA (and its compute capability), Apple's MPS backend, the CPU's flags and bf16 speed."""

from pathlib import Path

import pytest
import torch

from mlm_course import precision
from mlm_course.lab.hardware import accelerator_for
from mlm_course.train import mixed_precision

CPU = torch.device("cpu")
GPU = torch.device("cuda", 0)
MPS = torch.device("mps")


@pytest.fixture
def fake(monkeypatch):
    """Set what torch reports as available: fake(cuda=..., mps=..., capability=..., cpu_flags=..., ...)."""
    monkeypatch.delenv(precision.DEVICE_ENV_VAR, raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)

    def apply(cuda=False, mps=False, mps_bf16=True, capability=(9, 0), cpu_flags=("avx2", "fma"), cpu_speedup=2.0,
              current=0, gpu_name="NVIDIA H200"):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        # torch 2.13 counts emulation: True on every GPU, which is what the choice must not rely on
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: capability)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: gpu_name)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)  # Apple's backend, as on a Mac
        monkeypatch.setattr(precision, "mps_has_bf16", lambda: mps_bf16)
        monkeypatch.setattr(precision, "cpu_flags", lambda: set(cpu_flags))
        monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda: cpu_speedup)

    return apply


# ---- which device ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, GPU), (True, False, GPU), (False, True, MPS), (False, False, CPU)],
)
def test_preference_order(fake, cuda, mps, expected):
    fake(cuda=cuda, mps=mps)
    assert precision.pick_device() == expected


def test_apple_silicon_runs_on_mps_when_the_backend_is_available(fake):
    """A Mac without CUDA: the MPS backend (simulated) is chosen, computes in bf16 (fp16 + loss scaling where MPS has
    no bf16) and says so; asking for it by name works too."""
    fake(mps=True, mps_bf16=True)
    assert precision.mps_available()
    chosen = precision.pick_device()
    assert chosen == MPS and precision.pick_device("mps") == MPS
    assert precision.autocast_dtype(chosen, "auto") is torch.bfloat16
    assert precision.describe(chosen, torch.bfloat16) == "device: mps, precision: bf16 autocast"
    assert precision.machine(chosen)["device"] == "mps" and precision.machine(chosen)["gpu"] is None
    fake(mps=True, mps_bf16=False)
    assert precision.autocast_dtype(precision.pick_device(), "auto") is torch.float16
    assert precision.describe(MPS, torch.float16) == "device: mps, precision: fp16 autocast + loss scaling"


def test_mps_bf16_probe_is_false_where_there_is_no_mps():
    if torch.backends.mps.is_available():
        pytest.skip("this machine has MPS: the probe's answer is the hardware's")
    assert precision.mps_available() is False and precision.mps_has_bf16() is False  # the probe's failure is caught


def test_explicit_cpu_overrides_available_gpu(fake):
    fake(cuda=True, mps=True)
    assert precision.pick_device("cpu") == CPU


def test_env_var_overrides(fake, monkeypatch):
    fake(cuda=True)
    monkeypatch.setenv(precision.DEVICE_ENV_VAR, " CPU ")
    assert precision.pick_device() == CPU
    assert precision.pick_device("cuda") == GPU  # an argument wins over the variable


def test_indexed_cuda_device_is_kept(fake):
    fake(cuda=True)
    assert precision.pick_device("cuda:1") == torch.device("cuda", 1)


def test_bare_cuda_is_the_launchers_local_rank_else_the_current_gpu(fake, monkeypatch):
    fake(cuda=True, current=3)
    assert precision.pick_device("cuda") == torch.device("cuda", 3)
    monkeypatch.setenv("LOCAL_RANK", "1")  # under accelerate launch / torchrun: this process's own GPU
    assert precision.pick_device() == torch.device("cuda", 1)


@pytest.mark.parametrize(
    ("prefer", "message"),
    [("tpu", "must be cuda, cuda:N, mps or cpu"), ("xpu", "must be cuda, cuda:N, mps or cpu"),
     ("cpu:1", "must be cuda, cuda:N"), ("cuda:x", "must be cuda, cuda:N"), ("cuda", "no CUDA GPU"),
     ("cuda:1", "no CUDA GPU"), ("mps", "MPS is not available")],
)
def test_unavailable_or_unknown_device_is_a_clear_error(fake, prefer, message):
    fake()
    with pytest.raises(ValueError, match=message):
        precision.pick_device(prefer)


def test_real_machine_choice_is_usable():
    chosen = precision.pick_device()
    assert torch.zeros(1, device=chosen).device.type == chosen.type


# ---- which precision -------------------------------------------------------------------------------------------


def test_cpu_without_bf16_hardware_has_no_autocast(fake):
    fake()
    chosen = precision.pick_device()
    assert chosen == CPU and precision.autocast_dtype(chosen, "auto") is None
    assert precision.describe(chosen, None) == "device: cpu, precision: fp32"


@pytest.mark.parametrize("capability", [(8, 0), (8, 6), (9, 0), (10, 0)])
def test_cuda_ampere_or_newer_gets_bf16(fake, capability):
    fake(cuda=True, capability=capability)
    chosen = precision.pick_device()
    assert precision.cuda_has_bf16(chosen) and precision.autocast_dtype(chosen, "auto") is torch.bfloat16
    assert precision.describe(chosen, torch.bfloat16) == "device: cuda:0 (NVIDIA H200), precision: bf16 autocast"


@pytest.mark.parametrize("capability", [(7, 5), (7, 0), (6, 1)])  # T4, V100, P40: bf16 only emulated
def test_cuda_before_ampere_uses_fp16_with_loss_scaling_although_torch_says_bf16(fake, capability):
    fake(cuda=True, capability=capability, gpu_name="Tesla T4")
    assert torch.cuda.is_bf16_supported()  # what torch says, and what the choice must not follow
    chosen = precision.pick_device()
    assert not precision.cuda_has_bf16(chosen) and precision.autocast_dtype(chosen, "auto") is torch.float16
    assert precision.describe(chosen, torch.float16) == "device: cuda:0 (Tesla T4), precision: fp16 autocast + loss scaling"
    with pytest.raises(ValueError, match="no bf16 tensor cores"):
        precision.autocast_dtype(chosen, "bf16")
    assert precision.autocast_dtype(chosen, "fp16") is torch.float16


@pytest.mark.parametrize(("name", "accelerates"), [("fp32", "no"), ("bf16", "bf16")])
def test_each_precision_is_accelerates_mixed_precision_of_the_same_name(name, accelerates):
    assert mixed_precision(name, CPU) == accelerates


def test_fp16_on_a_cpu_is_refused_before_accelerate_is_asked():
    with pytest.raises(ValueError, match="fp16 autocast needs a GPU"):
        accelerator_for("fp16", "cpu")


@pytest.mark.parametrize(("flags", "speedup", "dtype"), [
    (("avx2", "avx512f", "avx512_bf16"), 2.0, torch.bfloat16),  # AMD Zen 4 / Intel Cooper Lake, bf16 measured 2x
    (("avx2", "amx_tile", "amx_bf16"), 1.3, torch.bfloat16),  # Intel Sapphire Rapids
    (("avx2", "avx512_bf16"), 1.2, torch.bfloat16),  # exactly CPU_BF16_MIN_SPEEDUP: enough
    (("avx2", "avx512f", "avx512_bf16"), 0.6, None),  # the flag, yet bf16 measured slower (the course's EPYC)
    (("avx2", "avx512_bf16"), 1.1, None),  # faster, but by less than CPU_BF16_MIN_SPEEDUP
    (("avx2", "avx512f"), 9.9, None),  # AVX-512 without bf16: emulated, slower than fp32
    ((), 9.9, None),  # macOS / no /proc/cpuinfo
])
def test_cpu_auto_precision_needs_bf16_hardware_that_measures_faster(fake, flags, speedup, dtype):
    fake(cpu_flags=flags, cpu_speedup=speedup)
    assert precision.CPU_BF16_MIN_SPEEDUP == 1.2
    assert precision.autocast_dtype(CPU, "auto") is precision.auto_dtype(CPU) is dtype
    assert precision.autocast_dtype(CPU, "fp32") is None
    assert precision.autocast_dtype(CPU, "bf16") is torch.bfloat16  # asked for: allowed everywhere


def test_cpu_without_bf16_flags_is_not_timed(fake, monkeypatch):
    fake(cpu_flags=("avx2",))
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda: pytest.fail("timed a CPU without bf16 instructions"))
    assert precision.autocast_dtype(CPU, "auto") is None


def test_cpu_bf16_speedup_is_measured_once_on_this_machine():
    precision.cpu_bf16_speedup.cache_clear()
    first = precision.cpu_bf16_speedup(size=128, repeats=3)
    assert 0.01 < first < 100  # a real ratio of two timings, not a constant
    assert precision.cpu_bf16_speedup(size=128, repeats=3) == first  # cached: measured once per process
    assert precision.cpu_bf16_speedup.cache_info().hits == 1
    precision.cpu_bf16_speedup.cache_clear()


def test_cpu_matmul_rate_is_measured_once_and_plausible():
    precision.cpu_matmul_tflops.cache_clear()
    rate = precision.cpu_matmul_tflops(torch.float32, size=256, repeats=2)
    assert 1e-4 < rate < 100  # TFLOP/s: from a slow shared core to a large server
    assert precision.cpu_matmul_tflops(torch.float32, size=256, repeats=2) == rate
    assert precision.cpu_matmul_tflops.cache_info().hits == 1
    precision.cpu_matmul_tflops.cache_clear()


def test_cpu_flags_are_read_from_this_machine():
    flags = precision.cpu_flags()
    assert isinstance(flags, set)
    try:
        with open("/proc/cpuinfo") as handle:
            text = handle.read()
    except OSError:
        assert flags == set()
    else:
        assert ("avx512_bf16" in text.split()) == ("avx512_bf16" in flags)


def test_precision_errors(fake):
    fake()
    with pytest.raises(ValueError, match="unknown precision"):
        precision.autocast_dtype(CPU, "fp8")
    with pytest.raises(ValueError, match="needs a GPU"):
        precision.autocast_dtype(CPU, "fp16")


def test_fp32_turns_autocast_off(fake):
    fake(cuda=True, cpu_flags=("avx512_bf16",))
    assert precision.autocast_dtype(GPU, "auto") is torch.bfloat16
    assert precision.autocast_dtype(GPU, "fp32") is None


@pytest.mark.parametrize(("dtype", "name"), [(None, "fp32"), (torch.bfloat16, "bf16"), (torch.float16, "fp16")])
def test_precision_names(dtype, name):
    assert precision.precision_name(dtype) == name


def test_autocast_on_cpu_in_fp32_is_a_no_op():
    with accelerator_for("fp32", "cpu").autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.float32


def test_autocast_bf16_on_cpu_computes_in_bf16():
    with accelerator_for("bf16", "cpu").autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.bfloat16


@pytest.mark.parametrize(("capability", "enabled"), [((8, 0), True), ((9, 0), True), ((7, 5), False)])
def test_tf32_only_on_ampere_or_newer(fake, capability, enabled):
    fake(cuda=True, capability=capability)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        assert precision.enable_tf32(GPU) is enabled
        assert torch.get_float32_matmul_precision() == ("high" if enabled else "highest")
        assert precision.enable_tf32(CPU) is False
    finally:
        torch.set_float32_matmul_precision(before)


# ---- where a run happened, and its peak ----------------------------------------------------------------------------


def test_machine_describes_where_a_run_happened(fake):
    fake()
    info = precision.machine()
    assert info["device"] == "cpu" and info["gpu"] is None
    assert info["torch"] == torch.__version__ and info["torch_threads"] == torch.get_num_threads()
    fake(cuda=True, gpu_name="NVIDIA A100-SXM4-80GB")
    assert precision.machine(GPU)["device"] == "cuda" and precision.machine(GPU)["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert precision.machine()["gpu"] == "NVIDIA A100-SXM4-80GB"  # the best device: the GPU


@pytest.mark.parametrize(("name", "peak"), [
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 NVL", 835.0), ("NVIDIA H100 PCIe", 756.0),
    ("NVIDIA H200", 989.0), ("NVIDIA H200 NVL", 835.0), ("NVIDIA L40", 181.0), ("NVIDIA L4", 121.0),
    ("NVIDIA L40S", 362.0), ("NVIDIA A100-SXM4-80GB", 312.0), ("Tesla T4", 65.0),
])
def test_peak_is_looked_up_by_the_exact_gpu_name(name, peak):
    assert precision.peak_tflops(name) == (peak, f"dense tensor-core peak of {name} ({peak:g} TFLOP/s)")


def test_unknown_or_missing_gpu_has_no_peak():
    assert precision.peak_tflops("NVIDIA H100 SXM5 prototype")[0] is None  # no substring guessing
    assert precision.peak_tflops(None) == (None, "no GPU: MFU is not reported")
    assert precision.peak_tflops("anything", 500.0) == (500.0, "given")


# ---- accelerate's shared state ---------------------------------------------------------------------------------


def test_nothing_in_the_package_resets_or_reads_accelerates_shared_state():
    """accelerate keeps one state per process; the package makes its Accelerator in lab/hardware.accelerator_for
    (which refuses a second precision with what to do) and never resets the state or reaches into its private
    dictionaries (only the tests reset it between tests)."""
    package = Path(precision.__file__).resolve().parent
    sources = sorted(package.rglob("*.py"))
    assert package / "precision.py" in sources and package / "lab" / "hardware.py" in sources
    touching = [f"{path.relative_to(package)}:{number}" for path in sources
                for number, line in enumerate(path.read_text().splitlines(), start=1)
                if "_reset_state" in line or "_shared_state" in line]
    assert touching == []


def test_notebooks_train_in_fp32_on_a_cpu_and_in_the_devices_precision_elsewhere():
    assert precision.notebook_precision(torch.device("cpu")) == "fp32"
    assert precision.notebook_precision(torch.device("cuda", 0)) == precision.notebook_precision(
        torch.device("mps")) == "auto"


def test_utilisation_is_flops_over_the_peak_of_the_precision_used():
    from transformers import BertConfig

    from mlm_course import bert

    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256)
    per_token = bert.flops_per_token(config, 32, head_share=0.0)
    for dtype in (None, torch.bfloat16):  # each divided by the peak of its own precision
        rate, mfu = precision.utilisation(per_token, tokens=10_000, seconds=2.0, device=torch.device("cpu"),
                                          dtype=dtype)
        assert rate == 5_000
        assert mfu == pytest.approx(per_token * 5_000 / 1e12 / precision.cpu_matmul_tflops(dtype or torch.float32))


def test_a_gpu_in_fp32_has_no_tensor_core_peak_and_bf16_has_its_own(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    gpu = torch.device("cuda", 0)
    assert precision.peak_for(gpu, None) is None and precision.peak_for(gpu, torch.bfloat16) == 989.0
