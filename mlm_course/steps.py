"""One optimisation step: the few lines every training run of the course executes, thousands of times.

:func:`training_step` is the step of notebook 06 (pretraining, with :func:`mlm_course.objective.masked_lm_loss`),
of notebook 07 (fine-tuning, with :func:`mlm_course.finetune.classification_loss`), of the loop on one screen
(:func:`mlm_course.train.train`): there is no other copy. (Its Accelerate edition,
:func:`mlm_course.train.train_with_accelerate`, which the command line runs, writes the same lines with Accelerate's
``backward`` and ``clip_grad_norm_``.)
In order, for each micro-batch:

1. its tensors to the model's device (on a GPU: copied from pinned memory without waiting);
2. the loss under ``torch.autocast`` (bf16 or fp16 where ``dtype`` asks for it; the loss functions compute the
   cross-entropy itself in fp32),
   weighted by the micro-batch's share of the step's target tokens, so that the step's loss is the sum of every
   per-token loss divided by the number of target tokens in all its micro-batches — one big batch, not the mean of
   micro-batch means (the bug transformers fixed in 4.46 with ``num_items_in_batch``);
3. ``backward``: d(loss)/d(weight) added into ``weight.grad`` — through the fp16 loss ``scaler`` when there is one,
   so that small gradients survive fp16;

then, once per step: unscale the gradients (fp16), clip their norm to ``max_grad_norm``, the optimiser's update
(skipped by the scaler when fp16 overflowed), the scaler's new scale, the learning-rate schedule's next value, and
zero the gradients, or the next step would add its gradients to these.

:func:`parameter_groups` and :func:`linear_schedule` make the optimiser and the schedule the step updates.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch

from mlm_course.masking import IGNORE_INDEX

Batch = dict[str, torch.Tensor]


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's two groups: weight decay on weight matrices, none on biases, LayerNorms and other vectors."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or "norm" in name.lower() else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def linear_schedule(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """The learning-rate multiplier after ``step`` steps: linear warm-up to 1, then linear decay to 0 at
    ``total_steps`` (BERT's schedule); for ``torch.optim.lr_scheduler.LambdaLR``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def count_targets(batch: Batch) -> torch.Tensor:
    """The positions a batch's loss averages over: its labels that are not −100 (masked tokens in pretraining,
    sentences in fine-tuning); 1 for a batch without labels. A tensor, counted where the batch is (on the host
    before it moves, so a GPU never waits for it)."""
    labels = batch.get("labels")
    return torch.tensor(1) if labels is None else (labels != IGNORE_INDEX).sum()


def training_step(
    model: torch.nn.Module,
    batches: Sequence[Batch],
    loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    max_grad_norm: float | None = 1.0,
    dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
    step_targets: torch.Tensor | int | None = None,
    processes: int = 1,
) -> dict[str, torch.Tensor]:
    """One optimiser step over ``batches`` (one batch, or the micro-batches of gradient accumulation).

    ``loss_fn(model, batch)`` is the mean loss over the batch's targets (:func:`count_targets`). With several
    processes whose gradients DDP averages, ``step_targets`` is the target count summed over all of them and
    ``processes`` their number. Returns the step's loss (with several processes, the mean of theirs) and the
    gradient norm before clipping, as tensors: reading them as numbers would make a GPU wait.
    """
    model.train()  # dropout on
    device = next(model.parameters()).device
    counts = [count_targets(batch) for batch in batches]
    total = step_targets if step_targets is not None else sum(counts)  # the target tokens of the whole step
    step_loss = 0.0
    for batch, count in zip(batches, counts, strict=True):
        batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model, batch) * (count * processes / total)  # Σ of its losses / all targets
        (loss if scaler is None else scaler.scale(loss)).backward()  # gradients add up in .grad
        step_loss = step_loss + loss.detach()
    result = {"loss": step_loss}  # with several processes: their mean is the step's loss
    if scaler is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
    if max_grad_norm is not None:
        result["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)  # skipped when a gradient overflowed fp16
        scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return result


def applied_gradient(model: torch.nn.Module, batches: Sequence[Batch],
                     loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor], **step_options) -> torch.Tensor:
    """The gradient of every weight, flattened into one vector, that one :func:`training_step` over ``batches``
    hands the optimiser (no clipping), measured on a copy of ``model``, which is left as it was."""
    trained = copy.deepcopy(model)
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    seen = []
    optimizer.register_step_pre_hook(lambda *_: seen.append(torch.cat([
        (p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in trained.parameters()])))
    training_step(trained, batches, loss_fn, optimizer, scheduler, max_grad_norm=None, **step_options)
    return seen[0]
