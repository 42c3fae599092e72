"""The runner: calls the lessons' :func:`~mlm_course.steps.training_step` over and over, and does the rest.

What the step does not: choosing the device and precision (:mod:`~mlm_course.precision`,
:mod:`~mlm_course.lab.hardware`), several processes (``accelerate launch`` or ``torchrun``: each process trains on its
own micro-batches, and the step's target tokens are summed over all of them), the AdamW optimiser and BERT's
schedule, the next batches built while the device computes, periodic evaluation, a JSON-lines metrics log, a
wall-clock budget, and atomic checkpoints that a killed run resumes from exactly (only the main process writes).

Between two logging steps the runner never waits for the device: losses and gradient norms stay tensors until a
logging step reads them all at once.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm  # a widget bar in Jupyter (ipywidgets), text elsewhere
from transformers import BertConfig

from mlm_course.atomic import write_folder_atomic
from mlm_course.lab import run_files
from mlm_course.lab.hardware import Hardware, Prefetcher, Processes
from mlm_course.models import CONFIGS, evaluation_mode, size_of
from mlm_course.precision import (
    PRECISIONS,
    autocast_dtype,
    describe,
    device_problem,
    enable_tf32,
    pick_device,
)
from mlm_course.steps import count_targets, linear_schedule, parameter_groups, training_step
from mlm_course.train import InvalidSettings

Batch = dict[str, torch.Tensor]
CHECKPOINT_POINTER = "latest_checkpoint.txt"


@dataclass(kw_only=True)
class OptimiserSettings:
    """What every training command shares: batches, AdamW, the warm-up and linear decay, clipping, logging, seed,
    device, precision. Warm-up lasts ``warmup_steps`` optimiser steps when given, else ``warmup_ratio`` of the run."""

    batch_size: int = field(default=32, metadata={"help": "examples per micro-batch and process"})
    grad_accum: int = field(default=1, metadata={"help": "micro-batches per optimiser step"})
    lr: float = field(default=5e-4, metadata={"help": "peak learning rate (AdamW)"})
    warmup_ratio: float = field(default=0.06, metadata={"help": "warm-up as a fraction of the optimiser steps"})
    warmup_steps: int | None = field(default=None, metadata={"help": "warm-up as a number of optimiser steps "
                                                                      "(wins over --warmup-ratio)"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW's decoupled weight decay (not on biases "
                                                                 "and LayerNorms)"})
    betas: tuple[float, float] = field(default=(0.9, 0.98), metadata={"help": "AdamW's beta1,beta2"})
    eps: float = field(default=1e-6, metadata={"help": "AdamW's epsilon"})
    max_grad_norm: float | None = field(default=1.0, metadata={"help": "clip the gradient to this norm"})
    log_every: int = field(default=10, metadata={"help": "a training row in metrics.jsonl every N steps"})
    seed: int = field(default=0, metadata={"help": "the seed every random draw of the run derives from"})
    device: str | None = field(default=None, metadata={"help": "cuda, cuda:N, mps or cpu (default: the best "
                                                                "available)"})
    precision: str = field(default="auto", metadata={"help": "auto, fp32, bf16 or fp16. auto: bf16 on GPUs of "
                                                             "compute capability ≥ 8.0, fp16 + loss scaling below; "
                                                             "on a CPU bf16 only where it measures faster"})
    compile: bool = field(default=False, metadata={"help": "torch.compile the model for training (static shapes)"})
    prefetch: bool | None = field(default=None, metadata={"help": "build the next step's batches in a background "
                                                                  "thread (default: on a GPU only)"})

    def problems(self, counts: tuple[str, ...] = ()) -> dict[str, str]:
        """Each bad field and what is wrong with it: ``counts`` (and the shared counts) must be ≥ 1 (or None)."""
        problems = {name: f"must be a whole number ≥ 1, not {getattr(self, name)!r}"
                    for name in ("batch_size", "grad_accum", "log_every", *counts)
                    if getattr(self, name) is not None
                    and not (type(getattr(self, name)) is int and getattr(self, name) >= 1)}
        checks = {
            "lr": (self.lr > 0, "must be > 0"),
            "warmup_ratio": (0 <= self.warmup_ratio <= 1, "must be a fraction of the steps in [0, 1]"),
            "warmup_steps": (self.warmup_steps is None or (type(self.warmup_steps) is int and self.warmup_steps >= 0),
                             "must be a whole number of steps ≥ 0"),
            "weight_decay": (self.weight_decay >= 0, "must be ≥ 0 (0: no weight decay)"),
            "betas": (len(self.betas) == 2 and all(0 <= beta < 1 for beta in self.betas),
                      "must be two numbers in [0, 1), beta1,beta2 (e.g. 0.9,0.98)"),
            "eps": (self.eps > 0, "must be > 0 (AdamW divides by √v + eps)"),
            "max_grad_norm": (self.max_grad_norm is None or self.max_grad_norm > 0, "must be > 0 (or None: no clipping)"),
            "seed": (type(self.seed) is int and 0 <= self.seed < 2**16, "must be a whole number in [0, 65535]"),
            "precision": (self.precision in PRECISIONS, f"must be one of {', '.join(PRECISIONS)}"),
        }
        problems |= {name: f"{why}, not {getattr(self, name)!r}" for name, (ok, why) in checks.items() if not ok}
        device = None if self.device is None else device_problem(self.device)
        if device is not None:
            problems["device"] = device
        return problems

    def warmup_for(self, total_steps: int) -> int:
        """Optimiser steps of warm-up in a run of ``total_steps``."""
        return self.warmup_steps if self.warmup_steps is not None else int(self.warmup_ratio * total_steps)


@dataclass(kw_only=True)
class LoopConfig(OptimiserSettings):
    """One run of :class:`TrainLoop`: the shared settings plus how long, how often to evaluate and to save."""

    steps: int = 1000
    eval_every: int = 200
    save_every: int = 500
    minutes: float | None = None  # wall-clock budget: stop, save and report when it is spent
    extra: dict[str, Any] = field(default_factory=dict)  # recorded with the checkpoints (data, masking, …)

    def __post_init__(self):
        self.betas = tuple(self.betas)
        problems = self.problems(("steps", "eval_every", "save_every"))
        if self.minutes is not None and not self.minutes > 0:
            problems["minutes"] = f"must be > 0 (or None: no budget), not {self.minutes!r}"
        if problems:
            raise InvalidSettings("training", problems)


@dataclass
class TrainResult:
    steps_done: int
    stopped_early: bool
    seconds: float
    metrics: list[dict]
    out_dir: Path | None
    tokens: int = 0  # input positions this process trained on (padding included), for tokens/s


#: The numbers of a BERT configuration that fix its weights' shapes.
SHAPE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                "max_position_embeddings")


def describe_shape(config: BertConfig) -> str:
    """A BERT configuration as a reader compares two: ``tiny (hidden 128, 2 layers, vocabulary 8,192)``."""
    layers = config.num_hidden_layers
    return (f"{size_of(config)} (hidden {config.hidden_size}, {layers} layer{'s' * (layers != 1)}, "
            f"vocabulary {config.vocab_size:,})")


def check_same_shape(model: torch.nn.Module, folder: Path) -> None:
    """A model saved in ``folder`` (a ``save_pretrained`` folder) must have the shape of ``model``: else an error
    that names both shapes and what to change."""
    own = getattr(model, "config", None)
    if not isinstance(own, BertConfig) or not (folder / "config.json").exists():
        return
    saved = BertConfig.from_pretrained(folder)
    if all(getattr(saved, name) == getattr(own, name) for name in SHAPE_FIELDS):
        return
    size = size_of(saved)
    if saved.vocab_size != own.vocab_size:
        fix = "resume with the tokenizer it was trained with"
    elif size in CONFIGS and size != size_of(own):
        fix = f"resume with --size {size}"
    else:
        fix = "resume with the model configuration it was trained with"
    raise ValueError(f"the checkpoint in {folder} is {describe_shape(saved)} but this run builds "
                     f"{describe_shape(own)}: {fix} or start a new --out")


def load_saved_weights(model: torch.nn.Module, folder: Path) -> None:
    """Load what ``model.save_pretrained(folder)`` wrote back into ``model`` (the course's BERTs)."""
    if not hasattr(type(model), "from_pretrained"):
        raise ValueError(f"{type(model).__name__} has no from_pretrained: pass load_model=... to resume its runs")
    check_same_shape(model, folder)
    saved = type(model).from_pretrained(folder).state_dict()
    own = model.state_dict()
    differ = sorted(name for name in own.keys() | saved.keys()
                    if name not in own or name not in saved or own[name].shape != saved[name].shape)
    if differ:
        raise ValueError(f"the checkpoint in {folder.parent} does not fit this model (names or shapes differ: "
                         f"{differ[:3]}): use the configuration it was trained with")
    model.load_state_dict(saved)


class TrainLoop:
    """Runs :func:`~mlm_course.steps.training_step` with ``loss_fn`` for ``config.steps`` optimiser steps.

    ``batch_for_step(step, slot)`` gives micro-batch ``slot`` of a step on the host (slots count over processes:
    ``process × grad_accum + micro``), a function of its arguments only. ``evaluate(model) -> dict`` runs every
    ``eval_every`` steps and at the end, in eval mode, without gradients; ``after_evaluation(row)`` returning True
    stops the run (early stopping). With ``out_dir`` the main process writes ``metrics.jsonl`` and
    (``checkpoints=True``) a checkpoint every ``save_every`` steps, the model as ``save_model(model, folder)``
    writes it (default ``save_pretrained``) and ``load_model(model, folder)`` reads it back on ``train(resume=True)``.
    Each training row averages the steps since the previous one, so a resumed run logs what an uninterrupted one does.
    """

    def __init__(self, model: torch.nn.Module, config: LoopConfig, *,
                 batch_for_step: Callable[[int, int], Batch],
                 loss_fn: Callable[[torch.nn.Module, Batch], torch.Tensor],
                 evaluate: Callable[[torch.nn.Module], dict] | None = None,
                 after_evaluation: Callable[[dict], bool] | None = None,
                 out_dir: str | os.PathLike | None = None,
                 save_model: Callable[[torch.nn.Module, Path], None] | None = None,
                 load_model: Callable[[torch.nn.Module, Path], None] | None = load_saved_weights,
                 checkpoints: bool = True, eval_split: str = "eval",
                 annotate: Callable[[int], dict] | None = None, progress: bool = True,
                 processes: Processes | None = None):
        self.config = config
        self.loss_fn = loss_fn
        self.batch_for_step = batch_for_step
        self.evaluate_fn = evaluate
        self.after_evaluation = after_evaluation
        self.processes = processes or Processes()
        self._place(model)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        if self.out_dir is not None and self.processes.is_main:
            run_files.check_output_dir(self.out_dir)
        self.save_model = save_model or (lambda m, path: m.save_pretrained(path))
        self.load_model = load_model
        self.checkpoints = checkpoints
        self.eval_split = eval_split
        self.annotate = annotate or (lambda step: {})
        self.progress = progress
        self._build_optimiser()
        prefetch = config.prefetch if config.prefetch is not None else self.device.type == "cuda"
        self.batches = Prefetcher(self._host_batches, pin=self.device.type == "cuda", enabled=prefetch)
        self.step = 0
        self.metrics: list[dict] = []
        self.stop_requested = False
        self.last_eval_step = -1
        self._running: dict[str, torch.Tensor] = {}  # sums since the last training row, on the device
        self._running_n = 0  # steps in those sums
        self._start = time.perf_counter()
        self._bar = None
        self.tokens = 0

    def _place(self, model: torch.nn.Module) -> None:
        """The device and precision of the run, the model on the device in fp32 (autocast does the rest, whatever
        a checkpoint stored), the step's hardware hooks, and the model the step trains (DDP, compiled)."""
        config = self.config
        self.device = pick_device(config.device) if self.processes.count == 1 else self.processes.state.device
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # cuda:1 means cuda:1 for every kernel, scaler and copy
        dtype = autocast_dtype(self.device, config.precision)
        self.tf32 = enable_tf32(self.device)
        self.model = model.float().to(self.device)
        self.hardware = Hardware(self.device, dtype, self.processes, seed=config.seed, grad_accum=config.grad_accum)
        trained = self.processes.wrap(self.model, self.device)
        self.trained = torch.compile(trained, dynamic=False) if config.compile else trained
        self.description = (f"{describe(self.device, dtype)}, processes: {self.processes.count}"
                            + (f", TF32 {'on' if self.tf32 else 'off'}" if self.device.type == "cuda" else "")
                            + f", torch.compile: {'on' if config.compile else 'off'}")

    def _build_optimiser(self) -> None:
        """Fused AdamW (one kernel for all weights) and BERT's schedule, which in fp16 does not count the steps the
        loss scaler skipped (``self.skipped``, known at logging steps)."""
        cfg = self.config
        fused = {"fused": True} if self.device.type in ("cuda", "cpu") else {}
        optimizer = torch.optim.AdamW(parameter_groups(self.model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas,
                                      eps=cfg.eps, **fused)
        factor = linear_schedule(cfg.warmup_for(cfg.steps), cfg.steps)
        self.skipped = 0
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: factor(step - self.skipped))
        self.optimizer = optimizer
        self.max_grad_norm = cfg.max_grad_norm
        if self.hardware.scaler is not None and self.max_grad_norm is None:
            self.max_grad_norm = math.inf  # fp16: the norm is how a skipped step is seen; an infinite bound clips nothing

    def _reschedule(self) -> None:
        """Set the learning rate the schedule gives now that more skipped steps are known (fp16)."""
        scheduler = self.scheduler
        for group, base, factor in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas,
                                       strict=True):
            group["lr"] = base * factor(scheduler.last_epoch)

    # ---- one step ------------------------------------------------------------------------------------------------
    def _host_batches(self, step: int) -> list[Batch]:
        """This process's micro-batches of ``step``, built on the host; an attention mask without padding is left
        out here, where checking it costs nothing (on a GPU, ``mask.all()`` would wait for the device)."""
        batches = [self.batch_for_step(step, self.hardware.slot(micro)) for micro in range(self.config.grad_accum)]
        return [{key: value for key, value in batch.items()
                 if not (key == "attention_mask" and bool(value.all()))} for batch in batches]

    def run_step(self) -> None:
        """One :func:`training_step` on this process's micro-batches, then logging, evaluation and checkpoint."""
        cfg = self.config
        upcoming = self.step + 1 if self.step + 1 < cfg.steps else None
        host = self.batches.get(self.step, next_step=upcoming)
        self.tokens += sum(batch["input_ids"].numel() for batch in host)
        hardware = self.hardware
        hardware.step = self.step
        self._lr = self.optimizer.param_groups[0]["lr"]
        targets = hardware.count(sum(count_targets(batch) for batch in host))
        values = training_step(self.trained, host, self.loss_fn, self.optimizer, self.scheduler,
                               max_grad_norm=self.max_grad_norm, dtype=hardware.dtype, scaler=hardware.scaler,
                               step_targets=targets, processes=self.processes.count,
                               around_micro_batch=partial(hardware.micro_batch, self.trained, count=len(host)))
        if self.hardware.scaler is not None:
            values["skipped_steps"] = (~torch.isfinite(values["grad_norm"])).float()
        for key, value in values.items():
            self._running[key] = self._running.get(key, 0.0) + value
        self._running_n += 1
        self.step += 1
        if self.step % cfg.log_every == 0 or self.step == cfg.steps:
            self._log_train()
        if self.step % cfg.eval_every == 0 and self.step < cfg.steps:
            self.run_evaluation()
        if self.checkpoints and self.out_dir is not None and self.step % cfg.save_every == 0 and self.step < cfg.steps:
            self.save_checkpoint()

    # ---- metrics and evaluation ----------------------------------------------------------------------------------
    def seconds(self) -> float:
        return round(time.perf_counter() - self._start, 4)

    def _running_sums(self) -> torch.Tensor:
        """The running sums in the order of ``self._running``, averaged over processes."""
        sums = torch.stack([torch.as_tensor(value, device=self.device).float() for value in self._running.values()])
        return self.processes.mean(sums)

    def _log_train(self) -> None:
        """Read the running sums off the device: the only wait of a training step."""
        sums = dict(zip(self._running, self._running_sums().tolist(), strict=True))
        skipped = int(sums.pop("skipped_steps", 0))
        if skipped:
            self.skipped += skipped
            self._reschedule()
        row = {"step": self.step, **self.annotate(self.step), "split": "train",
               **{key: value / self._running_n for key, value in sums.items()}, "lr": self._lr,
               **({"skipped_steps": skipped} if self.hardware.scaler is not None else {}), "seconds": self.seconds()}
        self.log(row)
        self._running = {}
        self._running_n = 0
        if self._bar is not None:
            self._bar.set_postfix(loss=f"{row['loss']:.3f}")

    def log(self, row: dict) -> None:
        self.metrics.append(row)
        if self.out_dir is not None and self.processes.is_main:
            run_files.append_metrics(self.out_dir, row)

    def run_evaluation(self) -> dict:
        """``evaluate`` on the plain model (no DDP, not compiled), logged; may request a stop."""
        self.last_eval_step = self.step
        if self.evaluate_fn is None:
            return {}
        with evaluation_mode(self.model), torch.no_grad(), self.hardware.autocast():
            result = self.evaluate_fn(self.model)
        row = {"step": self.step, **self.annotate(self.step), "split": self.eval_split, **result,
               "seconds": self.seconds()}
        self.log(row)
        if self.after_evaluation is not None and self.after_evaluation(row):
            self.stop_requested = True
        return result

    def _out_of_time(self) -> bool:
        minutes = self.config.minutes
        if minutes is None:
            return False
        late = time.perf_counter() - self._start > 60 * minutes
        if self.processes.count == 1:
            return late
        if self.step % self.config.log_every:  # processes agree at logging steps only (a wait)
            return False
        return bool(self.processes.mean(torch.tensor(float(late), device=self.device)) > 0)

    # ---- the loop ------------------------------------------------------------------------------------------------
    def train(self, *, resume: bool = False) -> TrainResult:
        """Train to ``config.steps`` (or until ``config.minutes`` is spent or a stop is requested)."""
        cfg = self.config
        resumed = self.resume() if resume else False
        if not resumed and self.out_dir is not None and self.processes.is_main:
            run_files.rewrite_metrics(self.out_dir, [])
        self._start = time.perf_counter()
        self._bar = tqdm(total=cfg.steps, initial=self.step, disable=not (self.progress and self.processes.is_main),
                         desc="training", leave=False)
        out_of_time = False
        try:
            while self.step < cfg.steps and not self.stop_requested and not out_of_time:
                self.run_step()
                self._bar.update(1)
                out_of_time = self._out_of_time()
        finally:
            self.batches.close()
            self._bar.close()
            self._bar = None
        if self._running_n:  # the steps since the last row: a budget or early stop within a logging window
            self._log_train()
        if self.last_eval_step != self.step:
            self.run_evaluation()
        if self.checkpoints and self.out_dir is not None:
            self.save_checkpoint()
        self.processes.wait()
        stopped = (out_of_time or self.stop_requested) and self.step < cfg.steps
        return TrainResult(self.step, stopped, time.perf_counter() - self._start, self.metrics, self.out_dir,
                           self.tokens)

    # ---- checkpoints ---------------------------------------------------------------------------------------------
    def trainer_state(self, running: dict) -> dict:
        """What resuming needs besides the weights: tensors, numbers and strings only (``weights_only`` loads it)."""
        scaler = self.hardware.scaler
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None, "step": self.step,
                "skipped": self.skipped, "running": running}

    def save_checkpoint(self) -> Path:
        """The main process writes ``checkpoint-<step>`` atomically, then points ``latest`` at it."""
        if self.out_dir is None:
            raise ValueError("this loop has no out_dir: pass out_dir=... to save checkpoints")
        final = self.out_dir / f"checkpoint-{self.step}"
        sums = self._running_sums().cpu() if self._running_n else []  # every process reduces, the main one writes
        running = {"sums": dict(zip(self._running, sums, strict=True)), "steps": self._running_n}
        if self.processes.is_main:
            previous = self.latest_checkpoint()

            def write(folder: Path) -> None:
                self.save_model(self.model, folder / "model")
                torch.save(self.trainer_state(running), folder / "trainer_state.pt")
                run_files.write_json_atomic(folder / "config.json", asdict(self.config))

            write_folder_atomic(final, write)
            run_files.write_text_atomic(self.out_dir / CHECKPOINT_POINTER, final.name)
            if previous is not None and previous != final and previous.exists():
                shutil.rmtree(previous)
        self.processes.wait()
        return final

    def latest_checkpoint(self) -> Path | None:
        if self.out_dir is None or not (self.out_dir / CHECKPOINT_POINTER).exists():
            return None
        return self.out_dir / (self.out_dir / CHECKPOINT_POINTER).read_text().strip()

    def resume(self) -> bool:
        """Load the latest checkpoint in ``out_dir``; False when there is none."""
        checkpoint = self.latest_checkpoint()
        if checkpoint is None:
            return False
        check_same_settings(checkpoint, self.config)
        if self.load_model is None:
            raise ValueError("this loop saves its model with a custom save_model: pass the matching load_model=... "
                             "to resume from its checkpoints")
        self.load_model(self.model, checkpoint / "model")
        state = torch.load(checkpoint / "trainer_state.pt", map_location=self.device, weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.hardware.scaler is not None and state["scaler"]:
            self.hardware.scaler.load_state_dict(state["scaler"])
        self.step = state["step"]
        self.skipped = state["skipped"]
        self._running = {key: value.to(self.device) for key, value in state["running"]["sums"].items()}
        self._running_n = state["running"]["steps"]
        if self.out_dir is not None and (self.out_dir / run_files.METRICS_FILE).exists():
            self.metrics = [m for m in run_files.read_metrics(self.out_dir) if m["step"] <= self.step]
            self.processes.wait()
            if self.processes.is_main:
                run_files.rewrite_metrics(self.out_dir, self.metrics)
        return True


def check_same_settings(checkpoint: Path, config: LoopConfig) -> None:
    """A resumed run must continue the run it resumes: the same steps, batches, learning rate and seed."""
    saved = json.loads((checkpoint / "config.json").read_text())
    for key in ("steps", "batch_size", "grad_accum", "lr", "seed"):
        if saved[key] != getattr(config, key) and not (key == "lr" and math.isclose(saved[key], config.lr)):
            raise ValueError(
                f"the checkpoint in {checkpoint} was trained with {key}={saved[key]!r}, not "
                f"{getattr(config, key)!r}: resume with the same settings or use another --out"
            )
