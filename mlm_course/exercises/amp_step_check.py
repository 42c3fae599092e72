"""The check of exercise 07.7, the mixed-precision (GPU-style) training step, run on the CPU.

The learner's step and :func:`reference_step` run side by side on copies of one small classifier and batch, each with
AdamW, a warm-up schedule and its own GradScaler, torch seeded before every step so that dropout draws the same masks.
The float16 run has four steps under a CPU GradScaler that starts at 2**10 and doubles after every good step
(``growth_interval=1``); before step 3 the scale is set to 2**40, so that its gradients overflow float16 and its update
must be skipped, and before step 4 back to 2**10. One bfloat16 step with a disabled scaler follows: the step must use
the ``dtype`` it is given. The batch comes on the CPU as :class:`NotMoved` tensors, which ``.to(device)`` turns into
plain ones, so a loss computed from a tensor that was never moved is recognised although the device is the CPU too.

At every step the check records the dtype of the logits, the loss given to ``scaler.scale`` (its dtype; whether the
backward pass went through the scaled loss, and outside autocast), the gradients the optimiser applied (none if the
update was skipped), the learning rate and the scale after the step, and traces the first difference from the
reference to its slip. The learning rate is compared before the overflow only: whether a skipped update advances the
schedule is a convention (the reference advances it; accelerate does not). The check needs torch 2.4 or newer.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.torch_version import TorchVersion

from mlm_course.exercises import Text, one_torch_thread
from mlm_course.exercises.step_check import _as_loss, _norm, _same_grads, _same_loss

Batch = dict[str, torch.Tensor]
AmpStep = Callable[..., object]  # (model, batch, optimizer, scheduler, scaler, device, dtype) -> loss

SEED, LR, WARMUP, MAX_GRAD_NORM = 0, 1e-2, 8, 1.0
MIN_TORCH = "2.4"  # torch.amp.GradScaler("cpu") came in 2.3, torch.is_autocast_enabled(device_type) in 2.4
INIT_SCALE, OVERFLOW_SCALE, OVERFLOW = 2.0**10, 2.0**40, 2  # the step at index OVERFLOW overflows float16
RUNS = ((torch.float16, (None, None, OVERFLOW_SCALE, INIT_SCALE)),  # the scale set before each step (None: leave it)
        (torch.bfloat16, (None,)))


def reference_step(model, batch, optimizer, scheduler, scaler, device, dtype):
    """The mixed-precision step the learner's is compared with."""
    batch = {name: tensor.to(device) for name, tensor in batch.items()}
    with torch.autocast(device_type=device.type, dtype=dtype):
        logits = model(batch["input_ids"], batch["attention_mask"])
    loss = F.cross_entropy(logits.float(), batch["labels"])
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


class NotMoved(torch.Tensor):
    """A batch tensor not moved to the device yet: ``.to(...)`` gives a plain tensor, every other op keeps the mark."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        return out.as_subclass(torch.Tensor) if func is torch.Tensor.to else out


@dataclass
class Record:
    """What one call of a step did: per forward pass the logits' (dtype, not moved); per ``scaler.scale`` the loss's
    (dtype, not moved); per ``optimizer.step`` the gradients it applied and the learning rate."""

    scale_before: float
    logits: list[tuple[torch.dtype, bool]] = field(default_factory=list)
    scaled: list[tuple[torch.dtype, bool]] = field(default_factory=list)
    scaled_backward: bool = False  # a gradient flowed back through a loss that scaler.scale returned
    backward_autocast: bool = False  # ... while autocast was on
    applied: list[list[torch.Tensor | None]] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    loss: object = None
    scale_after: float | None = None
    error: Exception | None = None

    def went_back(self, under_autocast: bool) -> None:
        self.scaled_backward = True
        self.backward_autocast |= under_autocast


def _marks(tensor: torch.Tensor) -> tuple[torch.dtype, bool]:
    return tensor.dtype, isinstance(tensor, NotMoved)


class Trainer:
    """A model with its optimiser, schedule and CPU GradScaler (whose ``scale`` notes each loss it scales, and
    whether backward went through the result); :meth:`run` calls ``step`` once and returns its Record."""

    def __init__(self, step: AmpStep, model: nn.Module, dtype: torch.dtype):
        self.step, self.model, self.dtype, self.records = step, model, dtype, []
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda n: min(1.0, (n + 1) / WARMUP))
        self.scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE, growth_interval=1,
                                           enabled=dtype == torch.float16)
        self.scaler.scale = self._scale  # the learner's scaler.scale(loss) is noted in the record
        self._params = list(model.parameters())
        self.optimizer.register_step_pre_hook(self._before_update)
        model.register_forward_hook(lambda module, args, out: self.records[-1].logits.append(_marks(out)))

    def _before_update(self, optimizer, args, kwargs) -> None:
        self.records[-1].applied.append([None if p.grad is None else p.grad.detach().clone() for p in self._params])
        self.records[-1].lrs.append(optimizer.param_groups[0]["lr"])

    def _scale(self, outputs: torch.Tensor) -> torch.Tensor:
        record = self.records[-1]
        record.scaled.append(_marks(outputs))
        scaled = torch.amp.GradScaler.scale(self.scaler, outputs)
        if scaled.requires_grad:
            scaled.register_hook(lambda grad: record.went_back(torch.is_autocast_enabled("cpu")))
        return scaled

    def run(self, batch: Batch, scale: float | None) -> Record:
        if scale is not None:
            self.scaler.update(scale)
        record = Record(self.scaler.get_scale())
        self.records.append(record)
        torch.manual_seed(SEED + len(self.records))  # the same dropout masks for both steps
        on_host = {name: tensor.clone().as_subclass(NotMoved) for name, tensor in batch.items()}
        try:
            record.loss = self.step(self.model, on_host, self.optimizer, self.scheduler, self.scaler,
                                    torch.device("cpu"), self.dtype)
        except Exception as exc:  # named by _error_hint
            record.error = exc
        record.scale_after = self.scaler.get_scale()
        return record


def grade_amp_step(build: Callable[[], tuple[nn.Module, Batch]], fn: AmpStep) -> Text | None:
    """None when ``fn`` steps like :func:`reference_step` on ``build()``'s model and batch, else the first slip's hint."""
    if TorchVersion(torch.__version__) < MIN_TORCH:
        return (Text(f"this check runs float16 autocast and torch.amp.GradScaler on the CPU, which need torch {MIN_TORCH} "
                     f"or newer; this is torch {torch.__version__}: pip install -U 'torch>={MIN_TORCH}'.",
                     f"这个检查要在 CPU 上运行 float16 autocast 和 torch.amp.GradScaler，这需要 torch {MIN_TORCH} 或更新版本；"
                     f"当前是 torch {torch.__version__}：pip install -U 'torch>={MIN_TORCH}'。"))
    with one_torch_thread(), torch.random.fork_rng(devices=[]):  # the learner's random state is left as it was
        model, batch = build()
        for dtype, scales in RUNS:
            want, got = Trainer(reference_step, copy.deepcopy(model), dtype), Trainer(fn, copy.deepcopy(model), dtype)
            for number, scale in enumerate(scales):
                expected = want.run(batch, scale)
                if expected.error is not None:
                    raise RuntimeError("the reference step failed") from expected.error
                hint = _difference(number, got.run(batch, scale), expected, dtype)
                if hint is not None:
                    return hint
    return None


def _difference(number: int, got: Record, want: Record, dtype: torch.dtype) -> Text | None:
    for check in (_error_hint, _forward_hint, _scaling_hint, _loss_hint, _update_hint):
        hint = check(number, got, want, dtype)
        if hint is not None:
            return hint
    return None


NOT_SCALED = (Text("the backward pass did not go through scaler.scale(loss): call scaler.scale(loss).backward(), not "
                   "loss.backward(). In float16 small gradients underflow to 0 unless the loss is first multiplied by the "
                   "scale; scaler.unscale_ then divides the gradients back.",
                   "反向传播没有经过 scaler.scale(loss)：要调用 scaler.scale(loss).backward()，而不是 loss.backward()。"
                   "在 float16 中，除非先把损失乘以缩放因子，否则小梯度会下溢成 0；之后 scaler.unscale_ 再把梯度除回来。"))


def _error_hint(number: int, got: Record, want: Record, dtype: torch.dtype) -> Text | None:
    if got.error is None:
        return None
    message = str(got.error)
    if "_scale is None" in message:
        return NOT_SCALED
    if "No inf checks were recorded" in message:
        return (Text("scaler.update() found no record of an inf check: scaler.unscale_(optimizer) and "
                     "scaler.step(optimizer) make it. Call both, and scaler.step(optimizer) instead of optimizer.step().",
                     "scaler.update() 找不到 inf 检查的记录：scaler.unscale_(optimizer) 和 scaler.step(optimizer) 会产生它。"
                     "两个都要调用，并用 scaler.step(optimizer) 代替 optimizer.step()。"))
    if "unscale_() is being called after step()" in message:
        return (Text("scaler.unscale_(optimizer) came after scaler.step(optimizer): unscale, clip, then step, so that the "
                     "update uses the clipped true gradients.",
                     "scaler.unscale_(optimizer) 出现在 scaler.step(optimizer) 之后：先取消缩放，再裁剪，最后 step，"
                     "这样更新用的才是裁剪后的真实梯度。"))
    if "already been called" in message:
        return (Text("call scaler.unscale_(optimizer) and scaler.step(optimizer) once per step, and scaler.update() at "
                     f"its end (it readies the scaler for the next step). Your step {number + 1} raised: {message}",
                     "每步调用一次 scaler.unscale_(optimizer) 和 scaler.step(optimizer)，并在最后调用 scaler.update()"
                     f"（它为下一步准备好 scaler）。你的第 {number + 1} 步报错：{message}"))
    return Text(f"step {number + 1} raised {type(got.error).__name__}: {message}",
                f"第 {number + 1} 步抛出了 {type(got.error).__name__}：{message}")


def _forward_hint(number: int, got: Record, want: Record, dtype: torch.dtype) -> Text | None:
    if not got.logits:
        return Text("the model was never called: logits = model(batch['input_ids'], batch['attention_mask']).",
                    "模型从没被调用：logits = model(batch['input_ids'], batch['attention_mask'])。")
    if any(not_moved for _, not_moved in got.logits + got.scaled):
        return (Text("the loss was computed from a batch tensor never moved with .to(device): on a GPU the model's weights "
                     "are there and a CPU tensor fails. Move every tensor first: batch = {k: v.to(device) for k, v in "
                     "batch.items()}.",
                     "损失是用一个从没用 .to(device) 移动过的批量张量计算的：在 GPU 上，模型的权重都在 GPU 里，CPU 张量会出错。"
                     "先移动每个张量：batch = {k: v.to(device) for k, v in batch.items()}。"))
    dtypes = {logit_dtype for logit_dtype, _ in got.logits}
    if torch.float32 in dtypes:
        return (Text("the model ran in float32 (its logits are float32): run the forward pass under "
                     "torch.autocast(device_type=device.type, dtype=dtype), so that its matrix products run in "
                     f"{str(dtype).removeprefix('torch.')}.",
                     "模型是以 float32 运行的（它的 logits 是 float32）：要在 "
                     "torch.autocast(device_type=device.type, dtype=dtype) 下做前向传播，这样它的矩阵乘法才会以 "
                     f"{str(dtype).removeprefix('torch.')} 运行。"))
    if dtypes != {dtype}:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        return (Text(f"the logits came out {names}, but this step was given dtype={dtype}: pass the dtype argument to "
                     "torch.autocast instead of writing one in.",
                     f"logits 的 dtype 是 {names}，但这一步给的是 dtype={dtype}：把 dtype 参数传给 torch.autocast，"
                     "不要自己写死一个。"))
    return None


def _scaling_hint(number: int, got: Record, want: Record, dtype: torch.dtype) -> Text | None:
    if not got.scaled:
        return NOT_SCALED
    if got.scaled[0][0] != torch.float32:
        return (Text(f"the loss you scaled was {str(got.scaled[0][0]).removeprefix('torch.')}: take the cross-entropy in "
                     "float32, of logits.float() (finetune.classification_loss does), not of the low-precision logits "
                     "outside autocast; a float16 loss keeps only about 3 significant digits.",
                     f"你缩放的损失是 {str(got.scaled[0][0]).removeprefix('torch.')}：交叉熵要用 float32 计算，"
                     "对 logits.float() 求（finetune.classification_loss 就是这样做的），而不是在 autocast 之外对低精度 logits 求；"
                     "float16 的损失只保留约 3 位有效数字。"))
    if not got.scaled_backward:
        return NOT_SCALED
    if got.backward_autocast:
        return (Text("the backward pass ran under autocast: end the with torch.autocast(...) block after the loss, before "
                     "scaler.scale(loss).backward(). Autocast is for the forward pass; each backward op already runs in "
                     "the dtype its forward op used, and PyTorch advises against backward under autocast.",
                     "反向传播是在 autocast 下运行的：在计算完损失之后、scaler.scale(loss).backward() 之前结束 "
                     "with torch.autocast(...) 块。autocast 用于前向传播；每个反向运算本来就以其前向运算所用的 dtype 运行，"
                     "PyTorch 也不建议在 autocast 下做反向传播。"))
    return None


def _loss_hint(number: int, got: Record, want: Record, dtype: torch.dtype) -> Text | None:
    loss, expected = _as_loss(got.loss), _as_loss(want.loss)
    if loss is None:
        return Text(f"return the step's loss (a one-number tensor or a float), not a {type(got.loss).__name__}.",
                    f"返回这一步的损失（只含一个数的张量或一个 float），而不是 {type(got.loss).__name__}。")
    if _same_loss(loss, expected):
        return None
    if math.isclose(loss, expected * got.scale_before, rel_tol=1e-5):
        return Text("you returned the scaled loss: return loss.detach(), not scaler.scale(loss).",
                    "你返回的是缩放后的损失：返回 loss.detach()，而不是 scaler.scale(loss)。")
    if number == 0:
        return (Text(f"the first loss is {loss:.6f}, the reference's {expected:.6f} on the same weights, batch and dropout: "
                     "under autocast logits = model(batch['input_ids'], batch['attention_mask']), then "
                     "F.cross_entropy(logits.float(), batch['labels']).",
                     f"第一步的损失是 {loss:.6f}，而在相同的权重、批量和 dropout 下参考的是 {expected:.6f}："
                     "在 autocast 下 logits = model(batch['input_ids'], batch['attention_mask'])，然后 "
                     "F.cross_entropy(logits.float(), batch['labels'])。"))
    return Text(f"the loss of step {number + 1} is {loss:.6f}, the reference's {expected:.6f}: the update before it differed.",
                f"第 {number + 1} 步的损失是 {loss:.6f}，参考的是 {expected:.6f}：之前的更新不同。")


def _update_hint(number: int, got: Record, want: Record, dtype: torch.dtype) -> Text | None:
    overflowed = dtype == torch.float16 and number >= OVERFLOW
    if len(got.applied) > 1:
        return (Text(f"the optimiser stepped {len(got.applied)} times in one step: scaler.step(optimizer) calls "
                     "optimizer.step() itself, so call only scaler.step(optimizer).",
                     f"优化器在一步中 step 了 {len(got.applied)} 次：scaler.step(optimizer) 自己会调用 optimizer.step()，"
                     "所以只调用 scaler.step(optimizer)。"))
    if got.applied and not want.applied:
        return (Text(f"step {number + 1}'s gradients overflowed float16 (the check set the scale to 2**40) and the "
                     "optimiser still applied them, inf and nan: call scaler.step(optimizer) instead of optimizer.step(); "
                     "it skips the update when scaler.unscale_ found inf or nan in the gradients.",
                     f"第 {number + 1} 步的梯度在 float16 中溢出了（检查把缩放因子设成了 2**40），但优化器仍然应用了它们，"
                     "包括 inf 和 nan：用 scaler.step(optimizer) 代替 optimizer.step()；"
                     "当 scaler.unscale_ 在梯度中发现 inf 或 nan 时，它会跳过这次更新。"))
    if want.applied and not got.applied:
        return ZERO_GRAD if overflowed else Text("the weights were not updated: call scaler.step(optimizer) in every step.",
                                                 "权重没有更新：每一步都调用 scaler.step(optimizer)。")
    if got.applied and not _same_grads(got.applied[0], want.applied[0]):
        return _gradient_hint(number, got)
    if got.applied and not overflowed and got.lrs != want.lrs:
        return (Text("the learning rate differs from the schedule's: call scheduler.step() once per step, after "
                     "scaler.step(optimizer).",
                     "学习率与调度不符：每步调用一次 scheduler.step()，放在 scaler.step(optimizer) 之后。"))
    return None if got.scale_after == want.scale_after else _scale_hint(number, got, want)


ZERO_GRAD = (Text("the gradients were not zeroed: backward() adds to the gradients already in .grad, so a step applies "
                  "the last one's too, and after an overflow the inf stays in .grad and every later update is skipped. "
                  "Call optimizer.zero_grad(set_to_none=True) after the update.",
                  "梯度没有清零：backward() 会把梯度累加到 .grad 中已有的梯度上，所以一步会把上一步的梯度也应用一遍；"
                  "而一旦溢出，inf 会留在 .grad 中，之后的每次更新都被跳过。在更新之后调用 "
                  "optimizer.zero_grad(set_to_none=True)。"))


def _gradient_hint(number: int, got: Record) -> Text:
    norm = _norm(got.applied[0])
    if number == 0 and math.isclose(norm * got.scale_before, MAX_GRAD_NORM, rel_tol=1e-3):
        return (Text(f"the optimiser applied gradients of norm {norm:.2e} = {MAX_GRAD_NORM} / scale: they were clipped "
                     f"while still multiplied by the scale ({got.scale_before:g}), then divided by it. Call "
                     "scaler.unscale_(optimizer) before torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).",
                     f"优化器应用的梯度范数是 {norm:.2e} = {MAX_GRAD_NORM} / 缩放因子：它们是在还乘着缩放因子"
                     f"（{got.scale_before:g}）时被裁剪的，然后才除以缩放因子。要在 "
                     "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) 之前调用 scaler.unscale_(optimizer)。"))
    if number == 0 and norm > MAX_GRAD_NORM * (1 + 1e-4):
        return (Text(f"the optimiser applied gradients of norm {norm:.2f}: clip them to norm {MAX_GRAD_NORM} after "
                     "scaler.unscale_(optimizer) and before scaler.step(optimizer).",
                     f"优化器应用的梯度范数是 {norm:.2f}：在 scaler.unscale_(optimizer) 之后、scaler.step(optimizer) 之前"
                     f"把它们裁剪到范数 {MAX_GRAD_NORM}。"))
    if number > 0:
        return ZERO_GRAD
    return (Text("the gradients the optimiser applied differ from the reference step's: scaler.scale(loss).backward(), "
                 f"scaler.unscale_(optimizer), torch.nn.utils.clip_grad_norm_(model.parameters(), {MAX_GRAD_NORM}).",
                 "优化器应用的梯度与参考训练步的不同：scaler.scale(loss).backward()、"
                 f"scaler.unscale_(optimizer)、torch.nn.utils.clip_grad_norm_(model.parameters(), {MAX_GRAD_NORM})。"))


def _scale_hint(number: int, got: Record, want: Record) -> Text:
    if got.scale_after == got.scale_before:
        return (Text(f"the scale stayed at {got.scale_after:g} after step {number + 1} (the reference's went to "
                     f"{want.scale_after:g}): call scaler.update() at the end of every step. It halves the scale after an "
                     "overflow and doubles it after a run of good steps (here every step); without it the scale never "
                     "adapts.",
                     f"第 {number + 1} 步之后缩放因子停在 {got.scale_after:g}（参考的变成了 {want.scale_after:g}）："
                     "每一步结束时都要调用 scaler.update()。它在溢出后把缩放因子减半，在连续若干个正常步之后"
                     "（这里是每一步）把它加倍；没有它，缩放因子永远不会调整。"))
    return (Text(f"after step {number + 1} the scale is {got.scale_after:g}, the reference's {want.scale_after:g}: call "
                 "scaler.update() once per step, after scaler.step(optimizer).",
                 f"第 {number + 1} 步之后缩放因子是 {got.scale_after:g}，参考的是 {want.scale_after:g}："
                 "每步调用一次 scaler.update()，放在 scaler.step(optimizer) 之后。"))


def amp_slipped_step(name: str, *, move: bool = True, autocast: bool = True, fp32_loss: bool = True,
                     scale: bool = True, clip: str = "after unscale", scaler_step: bool = True, update: bool = True,
                     zero_grad: bool = True) -> AmpStep:
    """A mixed-precision step with one of the common slips (the exercise's wrong answers): the batch not moved, no
    autocast, a float16 loss, backward on the unscaled loss, clipping before unscaling, optimizer.step() instead of
    scaler.step, no scaler.update(), gradients never zeroed."""

    def my_amp_step(model, batch, optimizer, scheduler, scaler, device, dtype):
        if move:
            batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device_type=device.type, dtype=dtype, enabled=autocast):
            logits = model(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits.float() if fp32_loss else logits, batch["labels"])
        (scaler.scale(loss) if scale else loss).backward()
        if clip == "before unscale":
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        scaler.unscale_(optimizer)
        if clip == "after unscale":
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        if scaler_step:
            scaler.step(optimizer)
        else:
            optimizer.step()
        if update:
            scaler.update()
        scheduler.step()
        if zero_grad:
            optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    my_amp_step.__name__ = my_amp_step.__qualname__ = name
    return my_amp_step
