"""The check of the "write the training step" exercises (06.2 pretraining, 07.1 fine-tuning).

The learner's step and the package's :func:`mlm_course.steps.training_step` run on identical copies of one small
model, on one fixed batch, each with AdamW over :func:`~mlm_course.steps.parameter_groups` and a
:func:`~mlm_course.steps.linear_schedule` warm-up, torch seeded before every step so that dropout draws the same
masks on both sides. The model comes in eval mode, as after an evaluation: the step must switch dropout on.

A hook on the optimiser records, at each update, what it is about to apply: the gradients (after clipping) and the
learning rate. The learner's step is right when, over the first :data:`COMPARED_STEPS` steps, its loss equals the
reference's to 1e-6 (relative), every applied gradient to 1e-6 (absolute) and the learning rate exactly, and when
its loss then falls over :data:`FALL_STEPS` steps: the mean of the last :data:`LAST_STEPS` losses lies more than the
exercise's ``fall`` below the first (dropout makes single steps noisy). Each difference is traced to the slip that
causes it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from mlm_course import steps
from mlm_course.exercises import Text, one_torch_thread

Batch = dict[str, torch.Tensor]
Step = Callable[[nn.Module, Batch, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler], object]

COMPARED_STEPS, FALL_STEPS, LAST_STEPS, SEED = 3, 20, 5, 0  # the fall: first loss against the last 5's mean
LR, WARMUP, TOTAL = 1e-2, 4, 40  # the learning rate moves at every compared step: 0.25, 0.5, 0.75 of its peak
MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class StepExercise:
    """What one "write the step" exercise needs: ``build()`` gives a fresh model (the same weights at every call)
    and the fixed batch; ``loss_fn`` is the loss the reference step uses (``loss_name`` in the hints);
    ``loss_slips`` are wrong losses with their hints; the loss must fall by ``fall`` nats over :data:`FALL_STEPS`."""

    build: Callable[[], tuple[nn.Module, Batch]]
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor]
    loss_name: str
    loss_slips: tuple[tuple[Callable[[nn.Module, Batch], torch.Tensor], Text], ...]
    fall: float


@dataclass
class StepRecorder:
    """Runs ``step`` on ``model`` and records, per step: the returned loss, the gradients the optimiser applied
    (None where it was not called), the learning rate, the norm of those gradient tensors once the step had
    returned (clipping *after* the update shows here), and ``model.training`` at each forward pass."""

    step: Step
    model: nn.Module
    losses: list[object] = field(default_factory=list)
    applied: list[list[torch.Tensor | None] | None] = field(default_factory=list)
    lrs: list[float | None] = field(default_factory=list)
    norms_after: list[float] = field(default_factory=list)
    training: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model.eval()  # as after an evaluation: the step must switch dropout on itself
        self.optimizer = torch.optim.AdamW(steps.parameter_groups(self.model, 0.01), lr=LR)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, steps.linear_schedule(WARMUP, TOTAL))
        self._params, self._live = list(self.model.parameters()), []
        self.optimizer.register_step_pre_hook(self._before_update)
        self.model.embeddings.register_forward_pre_hook(lambda module, args: self.training.append(module.training))

    def _before_update(self, optimizer, args, kwargs) -> None:
        self._live = [p.grad for p in self._params]
        self.applied[-1] = [None if g is None else g.detach().clone() for g in self._live]
        self.lrs[-1] = optimizer.param_groups[0]["lr"]

    def run(self, count: int, batch: Batch) -> None:
        for _ in range(count):
            self.applied.append(None)
            self.lrs.append(None)
            self._live = []
            torch.manual_seed(SEED + len(self.losses))  # the same dropout masks for both steps
            self.losses.append(self.step(self.model, {k: v.clone() for k, v in batch.items()}, self.optimizer,
                                         self.scheduler))
            self.norms_after.append(_norm(self._live))


def _norm(grads: list[torch.Tensor | None]) -> float:
    present = [g.detach().flatten() for g in grads if g is not None]
    return float(torch.linalg.vector_norm(torch.cat(present))) if present else 0.0


def _as_loss(value: object) -> float | None:
    """The loss a step returned as a number, or None if it returned something else."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _same_loss(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def _same_grads(got: list[torch.Tensor | None], want: list[torch.Tensor | None]) -> bool:
    return all((g is None) == (w is None) and (g is None or torch.allclose(g, w, rtol=0.0, atol=1e-6))
               for g, w in zip(got, want, strict=True))


def _reference(exercise: StepExercise, norms: list[float]) -> Step:
    def reference_step(model, batch, optimizer, scheduler):
        out = steps.training_step(model, [batch], exercise.loss_fn, optimizer, scheduler, max_grad_norm=MAX_GRAD_NORM)
        norms.append(float(out["grad_norm"]))
        return out["loss"]

    return reference_step


def grade_step(exercise: StepExercise, fn: Step) -> Text | None:
    """None when ``fn`` steps like :func:`mlm_course.steps.training_step`, else the hint for the first difference."""
    with one_torch_thread(), torch.random.fork_rng(devices=[]):  # the learner's random state is left as it was
        model, batch = exercise.build()
        norms: list[float] = []
        want = StepRecorder(_reference(exercise, norms), copy.deepcopy(model))
        want.run(COMPARED_STEPS, batch)
        if norms[0] <= 1.5 * MAX_GRAD_NORM:
            raise RuntimeError(f"the check batch's gradient norm is {norms[0]:.2f}: it must exceed the clipping "
                               "bound clearly, or forgetting to clip would go unnoticed")
        got = StepRecorder(fn, copy.deepcopy(model))
        got.run(COMPARED_STEPS, batch)
        hint = _first_difference(got, want, exercise, model, batch)
        if hint is None:
            got.run(FALL_STEPS - COMPARED_STEPS, batch)
            first = _as_loss(got.losses[0])
            last = sum(_as_loss(loss) for loss in got.losses[-LAST_STEPS:]) / LAST_STEPS
            if not last < first - exercise.fall:
                hint = (Text(f"the first {COMPARED_STEPS} steps match the reference, but over {FALL_STEPS} steps the loss "
                             f"went from {first:.3f} to {last:.3f} nats (mean of the last {LAST_STEPS}); on this one batch "
                             f"it must fall by more than {exercise.fall} nats. Does your step do all of its parts at "
                             "every call?",
                             f"前 {COMPARED_STEPS} 步与参考一致，但在 {FALL_STEPS} 步内损失从 {first:.3f} 变到 {last:.3f} 奈特"
                             f"（最后 {LAST_STEPS} 步的平均）；在这一个批量上它必须下降超过 {exercise.fall} 奈特。"
                             "你的训练步每次调用都完成了它的所有部分吗？"))
        return hint


def _first_difference(got: StepRecorder, want: StepRecorder, exercise: StepExercise, model: nn.Module,
                      batch: Batch) -> Text | None:
    losses = [_as_loss(loss) for loss in got.losses]
    if None in losses:
        returned = type(got.losses[losses.index(None)]).__name__
        return Text(f"return the step's loss (a one-number tensor or a float), not a {returned}.",
                    f"返回这一步的损失（只含一个数的张量或一个 float），而不是 {returned}。")
    if not got.training:
        return Text(f"the model was never run: compute the loss with {exercise.loss_name}(model, batch).",
                    f"模型从没运行过：用 {exercise.loss_name}(model, batch) 计算损失。")
    if not all(got.training):
        return (Text("dropout was off: the model came in eval mode (as it does after an evaluation), so the step must "
                     "switch training behaviour on itself: call model.train() first.",
                     "dropout 是关闭的：模型以 eval 模式传入（就像评估之后那样），所以训练步必须自己打开训练行为："
                     "先调用 model.train()。"))
    for number in range(COMPARED_STEPS):
        hint = _difference_at(number, losses, got, want, exercise, model, batch)
        if hint is not None:
            return hint
    return None


def _difference_at(number: int, losses: list[float], got: StepRecorder, want: StepRecorder,
                   exercise: StepExercise, model: nn.Module, batch: Batch) -> Text | None:
    expected = _as_loss(want.losses[number])
    if not _same_loss(losses[number], expected):
        if number == 0:
            return _loss_hint(losses[0], expected, exercise, model, batch)
        return (Text(f"the loss of step {number + 1} is {losses[number]:.6f}, the reference's {expected:.6f}: the update "
                     "before it differed. Order: loss, backward, clip, optimizer.step(), scheduler.step(), zero_grad().",
                     f"第 {number + 1} 步的损失是 {losses[number]:.6f}，参考的是 {expected:.6f}：之前的更新不同。"
                     "顺序：损失、backward、裁剪、optimizer.step()、scheduler.step()、zero_grad()。"))
    applied = got.applied[number]
    if applied is None:
        return Text("the weights were not updated: call optimizer.step() once in every step.",
                    "权重没有更新：每一步调用一次 optimizer.step()。")
    if all(g is None for g in applied):
        return (Text("the optimiser found no gradients: call loss.backward() before optimizer.step(), and zero the "
                     "gradients after the update (or before backward), not between backward and the update.",
                     "优化器没有找到梯度：在 optimizer.step() 之前调用 loss.backward()，并在更新之后（或 backward 之前）"
                     "把梯度清零，而不是在 backward 和更新之间。"))
    if not _same_grads(applied, want.applied[number]):
        return _gradient_hint(number, got)
    if got.lrs[number] != want.lrs[number]:
        return _rate_hint(number, got.lrs, want.lrs)
    return None


def _loss_hint(loss: float, expected: float, exercise: StepExercise, model: nn.Module, batch: Batch) -> Text:
    for slip, hint in exercise.loss_slips:
        with torch.no_grad():
            torch.manual_seed(SEED)
            if _same_loss(loss, float(slip(copy.deepcopy(model).train(), batch))):
                return hint
    return (Text(f"the first loss is {loss:.6f}, but {exercise.loss_name}(model, batch) on the same weights, batch and "
                 f"dropout gives {expected:.6f}: compute the loss with it.",
                 f"第一步的损失是 {loss:.6f}，但在相同的权重、批量和 dropout 下，{exercise.loss_name}(model, batch) "
                 f"给出 {expected:.6f}：用它计算损失。"))


def _gradient_hint(number: int, got: StepRecorder) -> Text:
    applied = _norm(got.applied[number])
    if number == 0 and applied > MAX_GRAD_NORM * (1 + 1e-4):
        if math.isclose(got.norms_after[0], MAX_GRAD_NORM, rel_tol=1e-4):
            return (Text(f"the gradients were clipped after optimizer.step(): the update had already used them "
                         f"unclipped (norm {applied:.2f}). Clip between backward() and optimizer.step().",
                         f"梯度是在 optimizer.step() 之后裁剪的：更新已经用了未裁剪的梯度（范数 {applied:.2f}）。"
                         "要在 backward() 和 optimizer.step() 之间裁剪。"))
        return (Text(f"the optimiser applied gradients of norm {applied:.2f}: clip them to norm {MAX_GRAD_NORM} first, "
                     "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0), between backward() and optimizer.step().",
                     f"优化器应用的梯度范数是 {applied:.2f}：先把它们裁剪到范数 {MAX_GRAD_NORM}，"
                     "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)，放在 backward() 和 optimizer.step() 之间。"))
    if number > 0:
        return (Text("the first update is right, the second applies other gradients: backward() adds to the gradients "
                     "already in .grad, so zero them in every step (optimizer.zero_grad() after the update).",
                     "第一次更新是对的，第二次用了别的梯度：backward() 会把梯度累加到 .grad 中已有的梯度上，"
                     "所以每一步都要清零（在更新之后调用 optimizer.zero_grad()）。"))
    return (Text("the gradients the optimiser applied differ from the reference step's: call loss.backward() once, then "
                 f"torch.nn.utils.clip_grad_norm_(model.parameters(), {MAX_GRAD_NORM}).",
                 "优化器应用的梯度与参考训练步的不同：调用一次 loss.backward()，然后 "
                 f"torch.nn.utils.clip_grad_norm_(model.parameters(), {MAX_GRAD_NORM})。"))


def _rate_hint(number: int, got: list[float | None], want: list[float | None]) -> Text:
    if number == 0 and got[0] == want[1]:
        return (Text("the first update used the second step's learning rate: call scheduler.step() after "
                     "optimizer.step(), not before.",
                     "第一次更新用了第二步的学习率：在 optimizer.step() 之后调用 scheduler.step()，而不是之前。"))
    if number > 0 and got[number] == got[number - 1]:
        return (Text(f"the learning rate stayed at {got[number]:.1e}: call scheduler.step() after optimizer.step() in "
                     "every step, or the warm-up never happens.",
                     f"学习率一直停在 {got[number]:.1e}：每一步都要在 optimizer.step() 之后调用 scheduler.step()，"
                     "否则预热永远不会发生。"))
    return Text("the learning rate differs from the schedule's: call scheduler.step() once per step, after the update.",
                "学习率与调度不符：每步调用一次 scheduler.step()，放在更新之后。")


def slipped_step(loss_fn: Callable[[nn.Module, Batch], torch.Tensor], name: str, *, train: bool = True,
                 clip: str = "before", schedule: str = "after", zero_grad: bool = True) -> Step:
    """A step with one of the common slips (the exercises' wrong answers): dropout left off, clipping left out or
    after the update, the schedule not stepped or stepped first, gradients never zeroed, or a wrong ``loss_fn``."""

    def my_step(model, batch, optimizer, scheduler):
        if train:
            model.train()
        loss = loss_fn(model, batch)
        loss.backward()
        if clip == "before":
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        if schedule == "before":
            scheduler.step()
        optimizer.step()
        if clip == "after":
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        if schedule == "after":
            scheduler.step()
        if zero_grad:
            optimizer.zero_grad()
        return loss

    my_step.__name__ = my_step.__qualname__ = name
    return my_step
