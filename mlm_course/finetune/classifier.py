"""The sequence classifier: loading one by name (pretrained or freshly initialised), and its head written out."""

from __future__ import annotations

import os

import torch
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from mlm_course import models, tokenization

LABEL_NAMES = ("negative", "positive")
RANDOM_PREFIX = "random:"


def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "Some weights ... newly initialized": expected for the head, said in the docs
    return previous


def load_classifier(
    name: str | os.PathLike,
    *,
    num_labels: int = 2,
    allow_hub: bool | None = None,
    seed: int = 0,
    dropout: float | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(sequence classifier in train mode, its tokenizer) by name; the head (and a missing pooler) is seeded.

    ``name``: ``"course"``, ``"minilm"``, a ``save_pretrained`` folder, a hub name (only with ``allow_hub``), or
    ``"random:<x>"`` — randomly initialised weights, where ``x`` is a configuration of
    :data:`mlm_course.models.CONFIGS` (with the course's WordPiece tokenizer) or any of the names above (its
    architecture and tokenizer, not its weights).
    """
    from transformers.utils import logging as hf_logging

    if num_labels < 2:
        raise ValueError(f"num_labels must be at least 2 for classification, got {num_labels}")
    name = str(name)
    label_kw = {"num_labels": num_labels}
    if num_labels == len(LABEL_NAMES):
        label_kw |= {"id2label": dict(enumerate(LABEL_NAMES)), "label2id": {n: i for i, n in enumerate(LABEL_NAMES)}}
    if dropout is not None:
        label_kw |= {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    previous = _quiet_transformers()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if name.startswith(RANDOM_PREFIX):
                arch = name[len(RANDOM_PREFIX):]
                if not arch:
                    raise ValueError("write 'random:<config>', e.g. 'random:tiny' or 'random:course'")
                if arch in models.CONFIGS:
                    tokenizer = tokenization.course_tokenizer()
                    config = models.build_config(arch, tokenizer, max_length=512)
                else:
                    source = models.resolve(arch, allow_hub=allow_hub)
                    config = AutoConfig.from_pretrained(source)
                    tokenizer = AutoTokenizer.from_pretrained(source)
                for key, value in label_kw.items():
                    setattr(config, key, value)
                model = AutoModelForSequenceClassification.from_config(config)
            else:
                source = models.resolve(name, allow_hub=allow_hub)
                try:
                    tokenizer = AutoTokenizer.from_pretrained(source)
                    # fp32 whatever the folder stores (transformers 5 keeps a bf16 checkpoint in bf16): autocast
                    # gives the speed, fp32 master weights the accuracy
                    model = AutoModelForSequenceClassification.from_pretrained(source, dtype=torch.float32,
                                                                               **label_kw)
                except OSError as exc:  # the hub path without network
                    raise ConnectionError(f"could not load {source!r} ({exc}); check the network") from exc
    finally:
        hf_logging.set_verbosity(previous)
    return model.train(), tokenizer


def head_by_hand(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """BERT's classification logits written out: tanh(W_p · h_[CLS] + b_p) → (dropout) → W_c · pooled + b_c."""
    encoder = getattr(model, model.base_model_prefix)
    hidden = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    cls = hidden[:, 0]  # the [CLS] position: the only one the head looks at
    pooled = torch.tanh(encoder.pooler.dense(cls))
    return model.classifier(model.dropout(pooled))
