"""Every branch of device selection, with availability simulated by monkeypatching torch."""

import pytest
import torch

from mlm_course import device


@pytest.fixture
def fake(monkeypatch):
    """Set what torch reports as available: fake(cuda=..., mps=..., bf16=...)."""
    monkeypatch.delenv(device.DEVICE_ENV_VAR, raising=False)

    def apply(cuda=False, mps=False, bf16=True, mps_bf16=True, capability=(9, 0)):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: capability)
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


def test_cpu_has_no_autocast(fake):
    fake()
    choice = device.choose()
    assert choice.device == torch.device("cpu")
    assert choice.autocast_dtype is None and not choice.needs_grad_scaler
    assert choice.describe() == "device: cpu, precision: fp32"


def test_cuda_with_bf16(fake):
    fake(cuda=True, bf16=True)
    assert device.autocast_dtype_for("cuda") is torch.bfloat16
    assert device.choose().needs_grad_scaler is False


def test_cuda_without_bf16_uses_fp16_with_scaler(fake):
    fake(cuda=True, bf16=False)
    choice = device.choose()
    assert choice.autocast_dtype is torch.float16 and choice.needs_grad_scaler


@pytest.mark.parametrize(("mps_bf16", "dtype"), [(True, torch.bfloat16), (False, torch.float16)])
def test_mps_dtype(fake, mps_bf16, dtype):
    fake(mps=True, mps_bf16=mps_bf16)
    assert device.choose().autocast_dtype is dtype


def test_mixed_precision_off(fake):
    fake(cuda=True)
    assert device.choose(mixed_precision=False).autocast_dtype is None


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
