"""Every branch of device selection, with availability simulated by monkeypatching torch."""

import pytest
import torch

from mlm_course.lab import precision as device


def cuda_test(test):
    """Marked ``cuda`` (``pytest -m cuda`` runs them on a GPU, scripts/gpu_check.sh does) and skipped without one."""
    return pytest.mark.cuda(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")(test))


@pytest.fixture
def fake(monkeypatch):
    """Set what torch reports as available: fake(cuda=..., mps=..., bf16=...)."""
    monkeypatch.delenv(device.DEVICE_ENV_VAR, raising=False)

    def apply(cuda=False, mps=False, mps_bf16=True, capability=(9, 0), cpu_flags=("avx2", "fma"), cpu_speedup=2.0):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        # torch 2.13 counts emulation: True on every GPU, which is what the choice must not rely on
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: capability)
        monkeypatch.setattr(device, "cpu_flags", lambda: set(cpu_flags))
        monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: cpu_speedup)
        monkeypatch.setattr(device, "_mps_available", lambda: mps)
        monkeypatch.setattr(device, "_mps_bf16_supported", lambda: mps_bf16)

    return apply


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")],
)
def test_preference_order(fake, cuda, mps, expected):
    fake(cuda=cuda, mps=mps)
    assert device.pick_device_type() == expected


def test_cpu_without_bf16_hardware_has_no_autocast(fake):
    fake()
    choice = device.choose()
    assert choice.device == torch.device("cpu")
    assert choice.autocast_dtype is None and not choice.needs_grad_scaler
    assert choice.describe() == "device: cpu, precision: fp32"


@pytest.mark.parametrize("capability", [(8, 0), (8, 6), (9, 0), (10, 0)])
def test_cuda_ampere_or_newer_gets_bf16(fake, capability):
    fake(cuda=True, capability=capability)
    assert device.autocast_dtype_for("cuda") is torch.bfloat16
    assert device.choose().needs_grad_scaler is False


@pytest.mark.parametrize("capability", [(7, 5), (7, 0), (6, 1)])  # T4, V100, P40: bf16 only emulated
def test_cuda_before_ampere_uses_fp16_with_scaler_although_torch_says_bf16(fake, capability):
    fake(cuda=True, capability=capability)
    choice = device.choose()
    assert choice.autocast_dtype is torch.float16 and choice.needs_grad_scaler
    with pytest.raises(ValueError, match="no bf16 tensor cores"):
        device.precision_dtype("cuda", "bf16")


@pytest.mark.parametrize(("flags", "speedup", "dtype"), [
    (("avx2", "avx512f", "avx512_bf16"), 2.0, torch.bfloat16),  # AMD Zen 4 / Intel Cooper Lake, bf16 measured 2x
    (("avx2", "amx_tile", "amx_bf16"), 1.3, torch.bfloat16),  # Intel Sapphire Rapids
    (("avx2", "avx512f", "avx512_bf16"), 0.6, None),  # the flag, yet bf16 measured slower (the course's EPYC)
    (("avx2", "avx512_bf16"), 1.1, None),  # faster, but by less than CPU_BF16_MIN_SPEEDUP
    (("avx2", "avx512f"), 9.9, None),  # AVX-512 without bf16: emulated, slower than fp32
    ((), 9.9, None),  # macOS / no /proc/cpuinfo
])
def test_cpu_auto_precision_needs_bf16_hardware_that_measures_faster(fake, flags, speedup, dtype):
    fake(cpu_flags=flags, cpu_speedup=speedup)
    assert device.precision_dtype("cpu", "auto") is dtype
    assert device.precision_dtype("cpu", "fp32") is None
    assert device.precision_dtype("cpu", "bf16") is torch.bfloat16  # asked for: allowed everywhere


def test_cpu_without_bf16_flags_is_not_timed(fake, monkeypatch):
    fake(cpu_flags=("avx2",))
    monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: pytest.fail("timed a CPU without bf16 instructions"))
    assert device.precision_dtype("cpu", "auto") is None


def test_cpu_bf16_speedup_is_measured_once_on_this_machine():
    device.cpu_bf16_speedup.cache_clear()
    first = device.cpu_bf16_speedup(size=128, repeats=3)
    assert 0.01 < first < 100  # a real ratio of two timings, not a constant
    assert device.cpu_bf16_speedup(size=128, repeats=3) == first  # cached: measured once per process
    assert device.cpu_bf16_speedup.cache_info().hits == 1
    device.cpu_bf16_speedup.cache_clear()


def test_cpu_flags_are_read_from_this_machine():
    flags = device.cpu_flags()
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
        device.precision_dtype("cpu", "fp8")
    with pytest.raises(ValueError, match="needs a GPU"):
        device.precision_dtype("cpu", "fp16")


@pytest.mark.parametrize(("mps_bf16", "dtype"), [(True, torch.bfloat16), (False, torch.float16)])
def test_mps_dtype(fake, mps_bf16, dtype):
    fake(mps=True, mps_bf16=mps_bf16)
    assert device.choose().autocast_dtype is dtype


def test_fp32_turns_autocast_off(fake):
    fake(cuda=True, cpu_flags=("avx512_bf16",))
    assert device.choose().autocast_dtype is torch.bfloat16
    assert device.choose(precision="fp32").autocast_dtype is None


def test_explicit_cpu_overrides_available_gpu(fake):
    fake(cuda=True, mps=True)
    assert device.pick_device_type("cpu") == "cpu"


def test_env_var_overrides(fake, monkeypatch):
    fake(cuda=True)
    monkeypatch.setenv(device.DEVICE_ENV_VAR, "CPU")
    assert device.pick_device_type() == "cpu"


def test_indexed_cuda_device_is_kept(fake):
    fake(cuda=True)
    assert device.pick_device_type("cuda:1") == "cuda:1"


@pytest.mark.parametrize(
    ("prefer", "message"),
    [("tpu", "unknown device"), ("cuda", "no CUDA GPU"), ("mps", "MPS is not available")],
)
def test_unavailable_or_unknown_device_is_a_clear_error(fake, prefer, message):
    fake()
    with pytest.raises(ValueError, match=message):
        device.pick_device_type(prefer)


def test_unknown_device_type_for_dtype():
    with pytest.raises(ValueError, match="unknown device type"):
        device.autocast_dtype_for("xpu")


def test_autocast_context_on_cpu_is_a_no_op(fake):
    fake()
    with device.choose().autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.float32


def test_autocast_context_bf16_on_cpu_device():
    choice = device.DeviceChoice(torch.device("cpu"), torch.bfloat16, False)
    with choice.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.bfloat16


@pytest.mark.parametrize(("capability", "enabled"), [((8, 0), True), ((7, 5), False)])
def test_tf32_only_on_ampere_or_newer(fake, monkeypatch, capability, enabled):
    fake(cuda=True, capability=capability)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        assert device.enable_tf32() is enabled
        assert torch.get_float32_matmul_precision() == ("high" if enabled else "highest")
    finally:
        torch.set_float32_matmul_precision(before)


def test_real_machine_choice_is_usable():
    choice = device.choose()
    assert torch.zeros(1, device=choice.device).device.type == choice.type


def test_machine_describes_where_a_run_happened(fake):
    fake()
    info = device.machine()
    assert info["device"] == "cpu" and info["gpu"] is None
    assert info["torch"] == torch.__version__ and info["torch_threads"] == torch.get_num_threads()
    assert device.machine("cuda")["device"] == "cuda"


def test_accelerator_does_not_keep_the_device_of_an_earlier_one(fake):
    """accelerate shares one state per process: after a CPU accelerator, asking for the best device must not
    silently stay on the CPU. The state's ``_cpu`` flag is what decides the device on a GPU machine."""
    from accelerate import Accelerator, PartialState
    from accelerate.state import AcceleratorState

    fake(mps=True)  # a GPU is the best device (accelerate itself still finds none here and stays on the CPU)
    AcceleratorState._reset_state(reset_partial_state=True)
    Accelerator(cpu=True)
    assert PartialState()._cpu is True
    device.make_accelerator(None, "fp32")  # the GPU was asked for: accelerate must not be forced to the CPU
    assert PartialState()._cpu is False
    device.make_accelerator("cpu", "fp32")
    assert PartialState()._cpu is True


def test_accelerator_copies_batches_without_waiting_on_cuda_only(fake):
    fake()
    accelerator = device.make_accelerator("cpu", "fp32")
    assert accelerator.dataloader_config.non_blocking is False  # nothing to overlap on a CPU
    assert accelerator.device.type == "cpu" and accelerator.mixed_precision == "no"
    assert device.make_accelerator("cpu", "bf16").mixed_precision == "bf16"


@cuda_test
def test_cuda_accelerator_after_a_cpu_one_is_on_the_gpu():
    from accelerate import Accelerator

    Accelerator(cpu=True)
    accelerator = device.make_accelerator("cuda", "auto")
    assert accelerator.device.type == "cuda" and accelerator.dataloader_config.non_blocking is True
    expected = "bf16" if torch.cuda.get_device_capability() >= (8, 0) else "fp16"
    assert accelerator.mixed_precision == expected
