"""Notebook 05's experiments with the masked-LM loss: a common bug (labels that are the corrupted input ids)
reproduced (:func:`buggy_mask_blocks`), trained with pretraining's own loop (:func:`train_with_batches`) and
measured by what the input showed at each predicted position (:func:`evaluate_by_action`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from mlm_course import masking
from mlm_course.lab.runner import TrainConfig, TrainLoop, TrainResult
from mlm_course.masking import IGNORE_INDEX, MaskSpec
from mlm_course.models import evaluation_mode
from mlm_course.objective import masked_lm_loss, masked_lm_outputs, mlm_loss
from mlm_course.pretraining import mask_blocks, training_batches


def buggy_mask_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec, generator: torch.Generator,
    attention_mask: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The bug, reproduced: mask ``input_ids`` in place, then pass ``labels=input_ids``.

    The labels are then the *corrupted* ids (the [MASK] id at masked positions) and no position is −100, so
    the loss rewards copying the input at every position and predicting [MASK] where [MASK] is shown. Otherwise
    it is :func:`mlm_course.pretraining.mask_blocks` (the same masks for the same generator state).
    """
    batch = mask_blocks(blocks, tokenizer, spec, generator, attention_mask=attention_mask)
    return {**batch, "labels": batch["input_ids"]}  # the bug: one tensor, so the labels are the masked input


def train_with_batches(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_blocks: torch.Tensor,
    config: TrainConfig,
    *,
    make_batch: Callable[..., dict[str, torch.Tensor]] = mask_blocks,
    spec: MaskSpec = MaskSpec(),
    progress: bool = False,
) -> TrainResult:
    """:func:`mlm_course.pretraining.pretrain`'s loop (its batches, seeds and loss: :func:`training_batches`) with a
    replaceable batch maker, e.g. :func:`buggy_mask_blocks`; no evaluation during training (use
    :func:`evaluate_by_action` after)."""
    batch_for_step = training_batches(train_blocks, tokenizer, config, spec, static_copies=None, short_share=0.0,
                                      slots=config.grad_accum, make_batch=make_batch)
    trainer = TrainLoop(model, config, batch_for_step=batch_for_step, compute_loss=masked_lm_loss, progress=progress)
    return trainer.train()


def actions_of(batch: Mapping[str, torch.Tensor], mask_token_id: int) -> torch.Tensor:
    """What happened at each position of a masked batch, recovered from it: 0 not selected, 1 [MASK], 2 random,
    3 unchanged (the codes of :mod:`mlm_course.masking`). A random draw equal to the original counts as unchanged."""
    labels, ids = batch["labels"], batch["input_ids"]
    selected = labels != IGNORE_INDEX
    action = torch.where(ids == mask_token_id, masking.MASKED, torch.where(ids == labels, masking.KEPT, masking.RANDOM))
    return torch.where(selected, action, masking.NOT_SELECTED)


@torch.no_grad()
def evaluate_by_action(
    model: PreTrainedModel, batches: Sequence[Mapping[str, torch.Tensor]], mask_token_id: int
) -> dict[str, dict[str, float]]:
    """Loss and top-1 at the masked positions of ``batches`` (frozen, correct labels), overall and per action.

    Also the share of positions where the top prediction is the [MASK] token, and where it is the token shown
    in the input (copying), and ``loss_ci95``: the half-width of a 95 % normal interval for the mean loss over the
    scored tokens (1.96 · standard error; noise from which tokens were scored, not from training). Keys: ``"all"``
    and the action names ``masking.ACTION_NAMES[1:]`` ("[MASK]", "random token", "unchanged").
    """
    device = next(model.parameters()).device
    rows = {"loss": [], "top1": [], "mask": [], "copy": [], "action": []}
    with evaluation_mode(model):
        for batch in batches:
            inputs = {key: batch[key].to(device) for key in ("input_ids", "attention_mask", "labels")}
            logits, labels = (t.cpu() for t in masked_lm_outputs(model, inputs, sparse=False))
            kept, best = batch["labels"] != IGNORE_INDEX, logits.argmax(-1)
            rows["loss"].append(mlm_loss(logits, labels, reduction="none"))
            rows["top1"].append((best == labels).double())
            rows["mask"].append((best == mask_token_id).double())
            rows["copy"].append((best == batch["input_ids"][kept]).double())
            rows["action"].append(actions_of(batch, mask_token_id)[kept])
    cat = {k: torch.cat(v) for k, v in rows.items()}
    groups = {"all": torch.ones_like(cat["action"], dtype=torch.bool)}
    groups.update({masking.ACTION_NAMES[code]: cat["action"] == code
                   for code in (masking.MASKED, masking.RANDOM, masking.KEPT)})
    out = {}
    for name, where in groups.items():
        n = int(where.sum())
        out[name] = {"tokens": n, **{k: float(cat[k][where].double().mean()) if n else float("nan")
                                     for k in ("loss", "top1", "mask", "copy")}}
        losses = cat["loss"][where].double()
        out[name]["loss_ci95"] = 1.96 * float(losses.std() / math.sqrt(n)) if n > 1 else float("nan")
    return out
