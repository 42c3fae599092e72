"""Notebook 05's experiment with the masked-LM loss: a common bug (labels that are the corrupted input ids)
reproduced (:func:`buggy_mask_blocks`) — a batch maker for :func:`mlm_course.pretraining.training_batches`, trained
with the course's loop (:func:`mlm_course.train.train`) — and measured by what the input showed at each predicted
position (:func:`evaluate_by_action`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from transformers import PreTrainedTokenizerBase

from mlm_course import masking
from mlm_course.masking import MaskSpec
from mlm_course.pretraining import mask_blocks, masked_predictions
from mlm_course.statistics import mean_interval


def buggy_mask_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec, generator: torch.Generator,
    attention_mask: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The bug, reproduced: mask ``input_ids`` in place, then pass ``labels=input_ids``.

    The labels are then the *corrupted* ids (the [MASK] id at masked positions) and no position is −100, so
    the loss rewards copying the input at every position and predicting [MASK] where [MASK] is shown. Otherwise
    it is :func:`mlm_course.pretraining.mask_blocks` (the same masks for the same generator state). Every position
    has a label, so every position is projected to the vocabulary.
    """
    batch = mask_blocks(blocks, tokenizer, spec, generator, attention_mask=attention_mask)
    batch = {key: value for key, value in batch.items() if key != "masked_positions"}
    return {**batch, "labels": batch["input_ids"]}  # the bug: one tensor, so the labels are the masked input


def evaluate_by_action(model: torch.nn.Module, batches: Sequence[Mapping[str, torch.Tensor]],
                       mask_token_id: int) -> dict[str, dict[str, float]]:
    """Loss and top-1 at the masked positions of ``batches`` (frozen, correct labels), overall and by what the
    input showed there (:func:`mlm_course.pretraining.masked_predictions`, the one scoring of masked positions).

    Also the share of positions where the top prediction is the [MASK] token, and where it is the token shown
    in the input (copying), and ``loss_ci95``: the half-width of the 95 % t-interval for the mean loss over the
    scored tokens (:func:`mlm_course.statistics.mean_interval`; noise from which tokens were scored, not from
    training). Keys: ``"all"``
    and the action names ``masking.ACTION_NAMES[1:]`` ("[MASK]", "random token", "unchanged"); a random token that
    happens to be the true one counts as unchanged.
    """
    found = masked_predictions(model, list(batches))
    action = torch.where(found.shown == mask_token_id, masking.MASKED,
                         torch.where(found.shown == found.labels, masking.KEPT, masking.RANDOM))
    groups = {"all": torch.ones_like(action, dtype=torch.bool)}
    groups |= {masking.ACTION_NAMES[code]: action == code for code in (masking.MASKED, masking.RANDOM, masking.KEPT)}
    best = found.top5[:, 0]
    out = {}
    for name, where in groups.items():
        n = int(where.sum())
        if n == 0:
            out[name] = {"tokens": 0, **dict.fromkeys(("loss", "top1", "mask", "copy", "loss_ci95"), float("nan"))}
            continue
        losses = -found.log_probs[where]
        out[name] = {"tokens": n, "loss": float(losses.mean()), "top1": found.scores(where)["top1"],
                     "mask": float((best[where] == mask_token_id).double().mean()),
                     "copy": float((best[where] == found.shown[where]).double().mean()),
                     "loss_ci95": mean_interval(losses.numpy())[1]}
    return out
