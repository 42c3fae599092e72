"""Fixtures of the CUDA tests (``tests/conftest.py``'s tokenizer and tiny model serve them too; it imports only torch,
transformers and the package, so ``scripts/gpu_check.py`` runs this folder on GPU images without Jupyter, nbval or
selenium).

Every test module here marks its tests ``cuda`` and skips them without a GPU (``make test`` collects and skips them).
"""

import pytest
import torch


@pytest.fixture
def gpu_precision() -> str:
    """What the course runs this GPU at: bf16 at compute capability ≥ 8.0, fp16 with loss scaling below."""
    return "bf16" if torch.cuda.get_device_capability() >= (8, 0) else "fp16"


@pytest.fixture
def blocks(bert_tok, sample_text):
    from mlm_course.pretraining import pack_blocks

    return pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)
