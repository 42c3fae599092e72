"""One optimisation step: the few lines every training run of the course executes, thousands of times.

:func:`training_step` is the step of notebook 06 (pretraining, with :func:`mlm_course.objective.masked_lm_loss`)
and of notebook 07 (fine-tuning, with :func:`mlm_course.finetune.classification_loss`), and the step the course's
runner calls (:mod:`mlm_course.lab.runner`): there is no other copy of it. In order:

1. the loss of each micro-batch, divided by their number, so the gradients add up to the gradient of their mean;
2. ``backward``: d(loss)/d(weight) for every weight, added into ``weight.grad``;
3. clip: if the gradient's norm over all weights exceeds ``max_grad_norm``, scale it down to that norm;
4. the optimiser's update (AdamW), then the learning-rate schedule's next value;
5. zero the gradients, or the next step would add its gradients to these.

:func:`parameter_groups` and :func:`linear_schedule` make the optimiser and the schedule the step updates.

The ``hardware`` argument is how the runner adds what one CPU does not need — mixed precision, a loss scaler,
several processes that add up their gradients — without a second copy of these lines. :data:`PLAIN` (the
default) is plain PyTorch in fp32 on one device: with it, the step is exactly the five lines above.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext

import torch

Batch = dict[str, torch.Tensor]


class Plain:
    """What :func:`training_step` asks of the hardware, done the plain way: fp32, one device, one process."""

    def micro_batch(self, model: torch.nn.Module, index: int, count: int):
        """Around micro-batch ``index`` of ``count``: nothing here (the runner syncs processes, seeds dropout)."""
        return nullcontext()

    def autocast(self):
        """Around the forward pass: nothing here (the runner computes in bf16 or fp16 where that pays)."""
        return nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def clip_grad_norm(self, parameters: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)


PLAIN = Plain()


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


def training_step(
    model: torch.nn.Module,
    batches: Sequence[Batch],
    loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    max_grad_norm: float | None = 1.0,
    hardware: Plain = PLAIN,
) -> dict[str, torch.Tensor]:
    """One optimiser step over ``batches`` (one batch, or the micro-batches of gradient accumulation).

    Returns the mean loss and (when clipping) the gradient norm before clipping, as tensors: reading them as
    numbers would make a GPU wait, so the runner reads them only when it logs.
    """
    model.train()  # dropout on
    loss_sum = 0.0
    for index, batch in enumerate(batches):
        with hardware.micro_batch(model, index, len(batches)):
            with hardware.autocast():
                loss = loss_fn(model, batch) / len(batches)
            hardware.backward(loss)  # gradients of the micro-batches add up in .grad
        loss_sum = loss_sum + loss.detach()
    result = {"loss": loss_sum}
    if max_grad_norm is not None:
        result["grad_norm"] = hardware.clip_grad_norm(model.parameters(), max_grad_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return result
