"""On a real GPU: the device and autocast precision the course picks (the mocked choices of tests/test_precision.py,
here with what the GPU itself reports)."""

import pytest
import torch

from mlm_course.precision import autocast_dtype, pick_device

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_auto_precision_is_bf16_from_compute_capability_8_and_fp16_with_loss_scaling_before(gpu_precision):
    device = pick_device("cuda")
    assert device.type == "cuda" and pick_device("cuda:0") == torch.device("cuda", 0)
    expected = {"bf16": torch.bfloat16, "fp16": torch.float16}[gpu_precision]
    assert autocast_dtype(device, "auto") is expected
    with torch.autocast("cuda", dtype=expected):
        product = torch.ones(64, 64, device=device) @ torch.ones(64, 64, device=device)
    assert product.dtype is expected and product[0, 0].item() == 64
    if gpu_precision == "fp16":  # a T4 or V100: bf16 only by emulation, refused with a sentence
        with pytest.raises(ValueError, match="no bf16 tensor cores"):
            autocast_dtype(device, "bf16")
