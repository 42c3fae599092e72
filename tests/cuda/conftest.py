"""Fixtures of the CUDA tests, self-contained: ``scripts/gpu_check.py`` runs this folder alone
(``pytest --confcutdir tests/cuda -m cuda tests/cuda``) on GPU images without Jupyter, nbval or selenium, so it
imports only torch, transformers and the package, never ``tests/conftest.py``.

Every test module here marks its tests ``cuda`` and skips them without a GPU (``make test`` collects and skips them).
"""

import pytest
import torch
from transformers import BertConfig

from mlm_course import tokenization
from mlm_course.bert import BertMLM

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want "
        "of a wife. However little known the feelings or views of such a man may be on his first entering a "
        "neighbourhood, this truth is so well fixed in the minds of the surrounding families. ") * 8


@pytest.fixture
def gpu_precision() -> str:
    """What the course runs this GPU at: bf16 at compute capability ≥ 8.0, fp16 with loss scaling below."""
    return "bf16" if torch.cuda.get_device_capability() >= (8, 0) else "fp16"


@pytest.fixture(scope="session")
def bert_tok():
    return tokenization.bert_tokenizer()


@pytest.fixture
def tiny_model(bert_tok):
    def build(seed: int = 0, **overrides) -> BertMLM:
        torch.manual_seed(seed)
        return BertMLM(BertConfig(vocab_size=len(bert_tok), max_position_embeddings=64,
                                  pad_token_id=bert_tok.pad_token_id, **{**TINY, **overrides}))

    return build


@pytest.fixture
def blocks(bert_tok):
    from mlm_course.pretraining import pack_blocks

    return pack_blocks([TEXT, TEXT.upper()], bert_tok, seq_len=32)
