"""The sequence classifier: the course's BERT with a classification head, loaded by name, and its loss.

:class:`mlm_course.bert.BertClassifier` is notebook 04's encoder with BERT's classification head on the [CLS]
vector: pooler (dense + tanh), dropout, a linear layer to one logit per class. :func:`classification_loss` is the
loss the training step (:func:`mlm_course.steps.training_step`) minimises; :func:`head_by_hand` writes the head out.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from transformers import BertConfig, PreTrainedTokenizerBase

from mlm_course import models, tokenization
from mlm_course.bert import BertClassifier
from mlm_course.masking import IGNORE_INDEX

LABEL_NAMES = ("negative", "positive")
RANDOM_PREFIX = "random:"


def _fresh(arch: str, num_labels: int, allow_hub: bool | None) -> tuple[BertClassifier, PreTrainedTokenizerBase]:
    """A classifier with fresh weights: of a size of ``models.CONFIGS`` (course tokenizer) or of a model's shape."""
    if not arch:
        raise ValueError("write 'random:<config>', e.g. 'random:tiny' or 'random:course'")
    if arch in models.CONFIGS:
        tokenizer = tokenization.course_tokenizer()
        config = models.build_config(arch, tokenizer, max_positions=512)
    else:
        source = models.resolve(arch, allow_hub=allow_hub)
        config, tokenizer = BertConfig.from_pretrained(source), models.load_tokenizer(source)
    return BertClassifier(config, num_labels=num_labels), tokenizer


def load_classifier(name: str | os.PathLike, *, num_labels: int = 2, allow_hub: bool | None = None, seed: int = 0,
                    dropout: float | None = None) -> tuple[BertClassifier, PreTrainedTokenizerBase]:
    """(classifier in train mode, its tokenizer) by name; a new head (and a missing pooler) drawn from ``seed``.

    ``name``: ``"course"``, ``"minilm"``, a transformers BERT folder, a hub name (only with ``allow_hub``), or
    ``"random:<x>"`` — fresh weights, where ``x`` is a size of :data:`mlm_course.models.CONFIGS` (with the course's
    WordPiece tokenizer) or any of the names above (its shape and tokenizer, not its weights).
    """
    if num_labels < 2:
        raise ValueError(f"num_labels must be at least 2 for classification, got {num_labels}")
    name = str(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name.startswith(RANDOM_PREFIX):
            model, tokenizer = _fresh(name[len(RANDOM_PREFIX):], num_labels, allow_hub)
        else:
            source = models.resolve(name, allow_hub=allow_hub)
            model = BertClassifier.from_pretrained(source, num_labels=num_labels, seed=seed)
            tokenizer = models.load_tokenizer(source)
    if num_labels == len(LABEL_NAMES):
        model.config.id2label = dict(enumerate(LABEL_NAMES))
        model.config.label2id = {label: i for i, label in enumerate(LABEL_NAMES)}
    if dropout is not None:
        models.set_dropout(model, dropout)
    return model.train(), tokenizer


def classification_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of the classifier's logits against ``batch["labels"]`` (rows labelled −100 ignored): the
    loss of fine-tuning's training step."""
    logits = model(batch["input_ids"], batch.get("attention_mask"))
    return F.cross_entropy(logits.float(), batch["labels"], ignore_index=IGNORE_INDEX)


def head_by_hand(model: BertClassifier, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """BERT's classification logits written out: W_c · dropout(tanh(W_p · h_[CLS] + b_p)) + b_c."""
    hidden = model.last_hidden_state(input_ids, attention_mask)
    cls = hidden[:, 0]  # the [CLS] position: the only one the head looks at
    pooled = torch.tanh(model.pooler.dense(cls))
    return model.classifier(model.dropout(pooled))
