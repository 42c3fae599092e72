"""The training loop on one screen: what notebook 06 pretrains BERT with and notebook 07 fine-tunes it with.

:func:`train` is the whole loop — the device, the precision and its loss scaler, AdamW and BERT's schedule, one
:func:`~mlm_course.steps.training_step` per optimiser step over ``grad_accum`` micro-batches, evaluation under
``torch.no_grad`` every ``eval_every`` steps, and the best weights on the evaluation set kept — in the spirit of
nanoGPT's ``train.py`` and the Hugging Face course's "A full training". :class:`TrainConfig` holds every setting,
with the course's recipes as its defaults; :func:`train_with_accelerate` is the same loop with Accelerate, which
adds several GPUs (DDP), mixed precision and the batches' placement without a line of ours.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import torch

from mlm_course import precision
from mlm_course.steps import Batch, count_targets, linear_schedule, parameter_groups, training_step

#: The evaluation figures where higher is better; for any other (a loss) lower is better.
HIGHER_IS_BETTER = ("accuracy", "f1", "top1", "top5")


class InvalidSettings(ValueError):
    """Settings refused before any work: ``problems`` maps each bad field to what is wrong with it (the command
    line names the field as its option: ``mask_rate`` is ``--mask-rate``)."""

    def __init__(self, kind: str, problems: dict[str, str]):
        self.problems = problems
        super().__init__(f"invalid {kind} settings: " + "; ".join(f"{k} {v}" for k, v in problems.items()))


@dataclass(kw_only=True)
class TrainConfig:
    """Every setting of :func:`train`. The defaults are a short run at the course's pretraining rate;
    :meth:`pretraining` gives the course's pretraining recipe (``mlm-course pretrain``'s), :meth:`fine_tuning`
    notebook 07's."""

    steps: int = 300  # optimiser steps: the schedule decays to 0 at the last
    batch_size: int = 32  # examples per micro-batch
    grad_accum: int = 1  # micro-batches per optimiser step
    lr: float = 3e-3  # peak learning rate
    warmup_ratio: float = 0.1  # linear warm-up over this share of the steps, then linear decay to 0
    warmup_steps: int | None = None  # the warm-up as a number of steps instead (wins over warmup_ratio)
    weight_decay: float = 0.01  # AdamW's, on weight matrices only
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    max_grad_norm: float | None = 1.0  # clip the gradient's norm to this (None: no clipping)
    eval_every: int = 75  # evaluate every N steps, and after the last
    log_every: int = 10  # a training row every N steps, their mean loss (reading a loss makes a GPU wait)
    precision: str = "fp32"  # fp32, bf16, fp16 or auto (precision.autocast_dtype)
    keep_best: str | None = None  # the evaluation figure whose best value's weights are kept ("loss", "accuracy")
    minutes: float | None = None  # stop after this many minutes (evaluations included), part-way down the schedule

    def warmup(self) -> int:
        """Optimiser steps of warm-up: ``warmup_steps`` when given, else ``warmup_ratio`` of the steps."""
        return self.warmup_steps if self.warmup_steps is not None else int(self.warmup_ratio * self.steps)

    @classmethod
    def pretraining(cls, **changes) -> TrainConfig:
        """The course's pretraining recipe, ``mlm-course pretrain``'s defaults: the shipped checkpoint's first stage
        (peak 3e-3 after 5 % warm-up, a 14,000-step schedule) stopped after 30 minutes, part-way down its decay —
        on the plateau a schedule fitted to the budget decays too soon (``benchmarks/bench_lunch_break.py``) — in
        the precision ``auto`` picks."""
        return replace(cls(steps=14_000, warmup_ratio=0.05, minutes=30.0, precision="auto"), **changes)

    @classmethod
    def fine_tuning(cls, hidden_size: int = 128, **changes) -> TrainConfig:
        """Notebook 07's recipe, for a model of ``hidden_size`` (the course checkpoint's 128 by default): the peak
        rate :func:`fine_tuning_lr`; AdamW as BERT is fine-tuned (β2 0.999, ε 1e-8, torch's defaults; pretraining
        takes RoBERTa's 0.98 and 1e-6); the best dev accuracy kept."""
        return replace(cls(lr=fine_tuning_lr(hidden_size), betas=(0.9, 0.999), eps=1e-8, eval_every=75,
                           keep_best="accuracy"), **changes)

    def __post_init__(self):
        self.betas = tuple(self.betas)
        problems = {name: f"must be a whole number ≥ 1, not {getattr(self, name)!r}"
                    for name in ("steps", "batch_size", "grad_accum", "eval_every", "log_every")
                    if not (type(getattr(self, name)) is int and getattr(self, name) >= 1)}
        problems |= optimiser_problems(self)
        if self.minutes is not None and not self.minutes > 0:
            problems["minutes"] = f"must be > 0 (or None: no time limit), not {self.minutes!r}"
        if problems:
            raise InvalidSettings("training", problems)


def fine_tuning_lr(hidden_size: int) -> float:
    """Fine-tuning's peak learning rate for a model of ``hidden_size``: the smaller the model, the larger its step.
    The course's tiny BERT (hidden 128) 5e-4; small BERTs and MiniLM (hidden 256-512) 1e-4; BERT-base and wider
    2e-5, within the 2e-5-5e-5 that Devlin et al. (2019) searched."""
    return 5e-4 if hidden_size <= 128 else 1e-4 if hidden_size <= 512 else 2e-5


def optimiser_problems(config) -> dict[str, str]:
    """Each bad optimiser, schedule or precision setting of ``config`` (a :class:`TrainConfig`, or a command's
    configuration with the same fields) and what is wrong with it."""
    checks = {
        "lr": (config.lr > 0, "must be > 0"),
        "warmup_ratio": (0 <= config.warmup_ratio <= 1, "must be a fraction of the steps in [0, 1]"),
        "warmup_steps": (config.warmup_steps is None or (type(config.warmup_steps) is int and config.warmup_steps >= 0),
                         "must be a whole number of steps ≥ 0"),
        "weight_decay": (config.weight_decay >= 0, "must be ≥ 0 (0: no weight decay)"),
        "betas": (len(config.betas) == 2 and all(0 <= beta < 1 for beta in config.betas),
                  "must be two numbers in [0, 1), beta1,beta2 (e.g. 0.9,0.98)"),
        "eps": (config.eps > 0, "must be > 0 (AdamW divides by √v + eps)"),
        "max_grad_norm": (config.max_grad_norm is None or config.max_grad_norm > 0, "must be > 0 (or None: no clipping)"),
        "precision": (config.precision in precision.PRECISIONS, f"must be one of {', '.join(precision.PRECISIONS)}"),
    }
    return {name: f"{why}, not {getattr(config, name)!r}" for name, (ok, why) in checks.items() if not ok}


@dataclass
class Trained:
    """What :func:`train` returns: the model (with the kept best weights), every logged row, the best row."""

    model: torch.nn.Module
    history: list[dict]
    best: dict | None
    seconds: float
    tokens: int  # input positions trained on (padding included), for tokens per second
    steps: int


def better(new: dict, old: dict | None, key: str, loss_tolerance: float = 1e-4) -> bool:
    """Whether evaluation ``new`` beats ``old`` on ``key`` (higher accuracy, lower loss); at an equal accuracy, a
    loss lower by more than ``loss_tolerance`` (a dev set of a few hundred sentences ties often)."""
    if old is None:
        return True
    if key in HIGHER_IS_BETTER and new[key] == old[key] and "loss" in new:
        return new["loss"] < old["loss"] - loss_tolerance
    return new[key] > old[key] if key in HIGHER_IS_BETTER else new[key] < old[key]


class Record:
    """What a loop keeps besides the weights: the logged rows, the best evaluation and its weights, the tokens.
    ``on_row(row)`` sees each row as it is logged (a run's metrics file); ``state_dict``/``load_state_dict`` let a
    checkpoint carry it, so a resumed run logs and keeps what an uninterrupted one does."""

    def __init__(self, keep_best: str | None, on_row: Callable[[dict], None] | None = None):
        self.keep_best, self.on_row, self.history, self.best, self.best_weights = keep_best, on_row, [], None, None
        self.tokens, self.steps, self.losses, self.steps_since = 0, 0, 0.0, 0
        self.start, self.seconds_before = time.perf_counter(), 0.0  # seconds_before: of the run before a resume

    def seconds(self) -> float:
        return self.seconds_before + time.perf_counter() - self.start

    def log(self, step: int, split: str, values: dict) -> None:
        self.history.append({"step": step, "split": split, **values, "seconds": round(self.seconds(), 4)})
        if self.on_row is not None:
            self.on_row(self.history[-1])

    def add_loss(self, loss: torch.Tensor) -> None:
        """A step's loss, summed on the device (no wait) until the next training row."""
        self.losses, self.steps_since, self.steps = self.losses + loss.detach(), self.steps_since + 1, self.steps + 1

    def log_training(self, step: int, lr: float, combine: Callable | None = None) -> None:
        """A training row: the mean loss of the steps since the last row (``combine``: over the processes)."""
        mean = self.losses / self.steps_since
        self.log(step, "train", {"loss": float(combine(mean) if combine else mean), "lr": lr})  # the GPU catches up
        self.losses, self.steps_since = 0.0, 0

    def evaluation(self, model: torch.nn.Module, step: int, split: str, scores: dict) -> None:
        if self.keep_best and self.keep_best not in scores:
            raise ValueError(f"keep_best={self.keep_best!r} is not a figure the evaluation returns "
                             f"({', '.join(sorted(scores))}): name one of them, or keep_best=None")
        self.log(step, split, scores)
        if self.keep_best and better(self.history[-1], self.best, self.keep_best):
            self.best, self.best_weights = self.history[-1], copy.deepcopy(model.state_dict())

    def state_dict(self) -> dict:
        names = ("history", "best", "best_weights", "tokens", "steps", "losses", "steps_since")
        return {name: getattr(self, name) for name in names} | {"seconds_before": self.seconds()}

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self.start = time.perf_counter()

    def result(self, model: torch.nn.Module) -> Trained:
        if self.best_weights is not None:
            model.load_state_dict(self.best_weights)
        return Trained(model.eval(), self.history, self.best, self.seconds(), self.tokens, self.steps)


def keep_best(config: TrainConfig, evaluate: Callable | None) -> str | None:
    """``config.keep_best``, refused before any step when there is no evaluation to pick the best of."""
    if config.keep_best and evaluate is None:
        raise ValueError(f"keep_best={config.keep_best!r} needs an evaluation: pass evaluate=..., or keep_best=None")
    return config.keep_best


def optimiser_and_schedule(model: torch.nn.Module, config: TrainConfig, device: torch.device):
    """AdamW over :func:`~mlm_course.steps.parameter_groups` — fused into one kernel for all weights on CUDA and
    CPU — and BERT's schedule: linear warm-up over ``warmup_steps`` (or ``warmup_ratio`` of the steps), then linear
    decay to 0."""
    fused = {"fused": True} if device.type in ("cuda", "cpu") else {}
    optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr, betas=config.betas,
                                  eps=config.eps, **fused)
    schedule = linear_schedule(config.warmup(), config.steps)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def due(step: int, every: int, last: bool) -> bool:
    """Whether step ``step`` logs or evaluates: every ``every`` steps, and the ``last`` step."""
    return step % every == 0 or last


def last_step(step: int, config: TrainConfig, seconds: Callable[[], float]) -> bool:
    """Whether ``step`` ends the run: the schedule's last step, or the first logged step (a GPU has caught up
    there) once the run's ``seconds()`` reach ``config.minutes``."""
    if step == config.steps:
        return True
    return config.minutes is not None and step % config.log_every == 0 and seconds() >= 60 * config.minutes


def train(model: torch.nn.Module, batches: Iterable[Batch], loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor],
          config: TrainConfig, *, evaluate: Callable[[torch.nn.Module], dict] | None = None, split: str = "eval",
          device: torch.device | str | None = None) -> Trained:
    """Train ``model`` for ``config.steps`` optimiser steps (or ``config.minutes``) on ``batches`` (an endless
    iterator of micro-batches on the host), scoring it with ``evaluate(model) -> dict`` every ``config.eval_every``
    steps."""
    device = precision.pick_device(None if device is None else str(device))
    model = model.to(device)
    dtype = precision.autocast_dtype(device, config.precision)  # None: fp32
    scaler = torch.amp.GradScaler(device.type) if dtype is torch.float16 else None  # fp16 needs loss scaling
    optimizer, scheduler = optimiser_and_schedule(model, config, device)
    batches, record = iter(batches), Record(keep_best(config, evaluate))
    for step in range(1, config.steps + 1):
        micro_batches = [next(batches) for _ in range(config.grad_accum)]
        record.tokens += sum(batch["input_ids"].numel() for batch in micro_batches)
        lr = scheduler.get_last_lr()[0]
        out = training_step(model, micro_batches, loss_fn, optimizer, scheduler, max_grad_norm=config.max_grad_norm,
                            dtype=dtype, scaler=scaler)  # to device, autocast, backward, unscale, clip, step, zero
        record.add_loss(out["loss"])
        last = last_step(step, config, record.seconds)
        if due(step, config.log_every, last):
            record.log_training(step, lr)
        if evaluate is not None and due(step, config.eval_every, last):
            model.eval()  # dropout off
            with torch.no_grad(), torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                record.evaluation(model, step, split, evaluate(model))
        if last:
            break
    return record.result(model)


def agreed_seconds(accelerator, record: Record) -> float:
    """The main process's seconds of the run, on every process: all of them stop at the same step."""
    from accelerate.utils import broadcast

    if accelerator.num_processes == 1:
        return record.seconds()
    return broadcast(torch.tensor([record.seconds()], device=accelerator.device), from_process=0).item()


#: Accelerate's name for each autocast dtype (None: fp32, no autocast).
ACCELERATE_NAMES = {None: "no", torch.bfloat16: "bf16", torch.float16: "fp16"}


def mixed_precision(name: str, device: torch.device | None = None) -> str:
    """Accelerate's name ("no", "bf16", "fp16") for the precision ``name`` gives on ``device`` (default: the best
    available): :func:`~mlm_course.precision.autocast_dtype` decides, ``auto`` included."""
    return ACCELERATE_NAMES[precision.autocast_dtype(device or precision.pick_device(), name)]


def train_with_accelerate(model: torch.nn.Module, batches: Iterable[Batch],
                          loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor], config: TrainConfig, *,
                          evaluate: Callable[[torch.nn.Module], dict] | None = None, split: str = "eval",
                          accelerator=None, run=None) -> Trained:
    """:func:`train` with Accelerate: the same loop, which ``accelerate launch`` runs on several GPUs (or CPU
    processes); ``accelerator`` defaults to one in ``config.precision``.

    What changes: ``prepare`` places the model and wraps it (DDP with several processes, autocast in mixed
    precision); ``accelerator.backward`` scales fp16 losses; its optimiser unscales, skips overflowed steps and
    updates the scale. Every process draws every micro-batch of a step and trains on its own share, so P processes
    with ``grad_accum`` micro-batches each train exactly as one batch of P × ``grad_accum``. ``run`` (a
    :class:`~mlm_course.lab.training_run.TrainingRun`) sees each row and each step: it writes the metrics and,
    through ``accelerator.save_state``, the checkpoints a killed run resumes from; it may stop the run early.
    """
    from accelerate import Accelerator

    accelerator = accelerator or Accelerator(mixed_precision=mixed_precision(config.precision))
    optimizer, scheduler = optimiser_and_schedule(model, config, accelerator.device)
    model, optimizer = accelerator.prepare(model, optimizer)  # not the schedule: ours steps once per optimiser step
    plain = accelerator.unwrap_model(model, keep_torch_compile=False)  # no DDP, not compiled: to evaluate, save
    record = Record(keep_best(config, evaluate), on_row=run.log if run else None)
    accelerator.register_for_checkpointing(scheduler, record)  # save_state and load_state carry them too
    if run is not None:
        run.start(accelerator, plain, record, config.steps)  # resumes from its latest checkpoint, if asked to
    processes, start = accelerator.num_processes, record.steps
    batches = itertools.islice(batches, start * config.grad_accum * processes, None)  # skip the steps done
    for step in range(start + 1, config.steps + 1):
        every = [next(batches) for _ in range(config.grad_accum * processes)]  # the whole step, on every process
        counts = [count_targets(batch) for batch in every]
        targets = sum(counts)  # over all processes, without communicating
        mine = list(zip(every, counts, strict=True))[accelerator.process_index::processes]
        record.tokens += sum(batch["input_ids"].numel() for batch, _ in mine)
        lr, step_loss = scheduler.get_last_lr()[0], 0.0
        model.train()
        for index, (batch, count) in enumerate(mine):
            last = index == len(mine) - 1
            with contextlib.nullcontext() if last else accelerator.no_sync(model):  # DDP averages after the last
                loss = loss_fn(model, {k: v.to(accelerator.device, non_blocking=True) for k, v in batch.items()})
                loss = loss * (count * processes / targets)
                accelerator.backward(loss)
            step_loss = step_loss + loss.detach()
        if config.max_grad_norm is not None:
            accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)  # unscales fp16 first
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        record.add_loss(step_loss)
        last = last_step(step, config, lambda: agreed_seconds(accelerator, record))
        if due(step, config.log_every, last):
            record.log_training(step, lr, combine=lambda mean: accelerator.reduce(mean, "mean"))
        if evaluate is not None and due(step, config.eval_every, last):
            with torch.no_grad(), accelerator.autocast():
                record.evaluation(plain.eval(), step, split, evaluate(plain))
        if (run is not None and run.after_step(step)) or last:  # a checkpoint when due; early stopping
            break
    return record.result(plain)
