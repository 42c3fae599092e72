"""The one training loop, on ``accelerate``: pretraining and fine-tuning both run :class:`TrainLoop`.

Device placement, mixed precision (bf16 / fp16 + loss scaling / fp32, see :func:`mlm_course.lab.precision.precision_dtype`),
gradient accumulation, several processes through ``accelerate launch`` (DDP), AdamW with weight-decay groups,
linear warm-up then linear decay, clipping, periodic evaluation, a JSON-lines metrics log, and atomic checkpoints
that a killed run resumes from; only the main process writes. Every random draw of step ``s`` comes from a
generator seeded by ``(seed, s, slot)``, so a resumed run reaches exactly the weights of an uninterrupted one.

Between two logging steps the loop never waits for the device: losses, accuracies and gradient norms stay
tensors until a logging step reads them all at once, attention masks without padding are left out on the host
(transformers would check them on the device), and CUDA copies are pinned and non-blocking.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm  # a widget bar in Jupyter (ipywidgets), text elsewhere

from mlm_course.lab import precision as devices
from mlm_course.lab import run_files
from mlm_course.lab.precision import lean_batch, to_device
from mlm_course.models import evaluation_mode

Batch = dict[str, torch.Tensor]
CHECKPOINT_POINTER = "latest_checkpoint.txt"


class InvalidSettings(ValueError):
    """Settings refused before any work: ``problems`` maps each bad field to what is wrong with it (the command
    line names the field as its option, ``batch_size`` as ``--batch-size``)."""

    def __init__(self, kind: str, problems: dict[str, str]):
        self.problems = problems
        super().__init__(f"invalid {kind} settings: " + "; ".join(f"{k} {v}" for k, v in problems.items()))


@dataclass(kw_only=True)
class OptimiserSettings:
    """What pretraining and fine-tuning share: batches, AdamW, the warm-up and linear decay, logging, seed, device,
    precision. Warm-up lasts ``warmup_steps`` optimiser steps when given, else ``warmup_ratio`` of the run."""

    batch_size: int = 32
    grad_accum: int = 1
    lr: float = 5e-4
    warmup_ratio: float = 0.06
    warmup_steps: int | None = None
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    grad_clip: float | None = 1.0
    log_every: int = 10
    seed: int = 0
    device: str | None = None
    precision: str = "auto"  # auto, fp32, bf16, fp16 (see mlm_course.lab.precision.precision_dtype)
    compile: bool = False  # torch.compile the training step (the evaluation runs eagerly)

    def _problems(self, counts: tuple[str, ...]) -> dict[str, str]:
        """Each bad field and what is wrong with it: ``counts`` (and the shared counts) must be ≥ 1 (or None)."""
        problems = {name: f"must be ≥ 1, not {getattr(self, name)!r}"
                    for name in ("batch_size", "grad_accum", "log_every", *counts)
                    if getattr(self, name) is not None and not getattr(self, name) >= 1}
        if not self.lr > 0:
            problems["lr"] = f"must be > 0, not {self.lr!r}"
        if not 0 <= self.warmup_ratio <= 1:
            problems["warmup_ratio"] = f"must be a fraction of the steps in [0, 1], not {self.warmup_ratio!r}"
        steps = self.warmup_steps
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 0):
            problems["warmup_steps"] = f"must be a whole number of steps ≥ 0, not {self.warmup_steps!r}"
        if self.precision not in devices.PRECISIONS:
            problems["precision"] = f"must be one of {', '.join(devices.PRECISIONS)}, not {self.precision!r}"
        return problems

    def warmup_for(self, total_steps: int) -> int:
        """Optimiser steps of warm-up in a run of ``total_steps``."""
        return self.warmup_steps if self.warmup_steps is not None else int(self.warmup_ratio * total_steps)


@dataclass(kw_only=True)
class TrainConfig(OptimiserSettings):
    """Settings of a :class:`TrainLoop` run (pretraining defaults; :class:`OptimiserSettings` has the shared ones)."""

    steps: int = 1000
    eval_every: int = 200
    save_every: int = 500
    minutes: float | None = None  # wall-clock budget: stop, save and report when it is spent
    extra: dict[str, Any] = field(default_factory=dict)  # recorded with the checkpoint (data, masking, …)

    def __post_init__(self):
        self.betas = tuple(self.betas)
        problems = self._problems(("steps", "eval_every", "save_every"))
        if self.minutes is not None and not self.minutes > 0:
            problems["minutes"] = f"must be > 0 (or None: no budget), not {self.minutes!r}"
        if problems:
            raise InvalidSettings("training", problems)


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    """The seed of draw ``stream`` at step ``step``: independent of how the run was interrupted."""
    return ((seed * 1_000_003 + step) * 101 + stream) % (2**63)


def step_generator(seed: int, step: int, stream: int = 0) -> torch.Generator:
    """A generator seeded with :func:`step_seed`."""
    return torch.Generator().manual_seed(step_seed(seed, step, stream))


def dropout_seed(seed: int, step: int, slot: int) -> int:
    """The seed of the dropout draws of micro-batch ``slot`` of ``step``; slots count over processes, so each
    process draws its own masks (slot = process index × grad_accum + micro-batch)."""
    return step_seed(seed, step, 1000 + slot)


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay on weight matrices, none on biases, LayerNorm and embeddings' norms."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "LayerNorm" in name or "norm" in name.lower() else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def linear_schedule(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """The LR multiplier: linear warm-up to 1, then linear decay to 0 at ``total_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


@dataclass
class TrainResult:
    steps_done: int
    stopped_early: bool
    seconds: float
    metrics: list[dict]
    out_dir: Path | None


class _LossModule(torch.nn.Module):
    """The model and its loss as one forward, so DDP (which syncs what its forward ran) and torch.compile see
    the whole step, also when the loss calls parts of the model (sparse MLM logits)."""

    def __init__(self, model: torch.nn.Module, compute_loss: Callable):
        super().__init__()
        self.model = model
        self.compute_loss = compute_loss

    def forward(self, batch: Batch):
        return self.compute_loss(self.model, batch)


class TrainLoop:
    """Runs ``compute_loss(model, batch_for_step(step, slot))`` for ``config.steps`` optimiser steps on accelerate.

    ``slot`` numbers the micro-batches of a step over all processes (``process × grad_accum + micro``; ``slots``
    of them per step), so each process trains on its own share. ``compute_loss`` returns (loss, stats); keep the
    stats tensors (a ``float()`` would wait for the device). ``evaluate(model) -> dict`` runs every ``eval_every``
    steps and at the end, in eval mode, without gradients, in the autocast dtype; ``after_evaluation(row)``
    returning True stops the run (early stopping). With ``out_dir`` the main process writes ``metrics.jsonl`` and
    (``checkpoints=True``) checkpoints every ``save_every`` steps; ``train(resume=True)`` continues from the latest.
    Checkpoints hold the model as ``save_model(model, folder)`` writes it and ``load_model(model, folder)`` reads it
    back (default: ``save_pretrained`` and :func:`load_saved_weights`); a custom saver needs its loader to resume.
    Each training row averages the steps since the previous one (a resumed run logs what an uninterrupted one does).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        config: TrainConfig,
        *,
        batch_for_step: Callable[[int, int], Batch],
        compute_loss: Callable[[torch.nn.Module, Batch], tuple[torch.Tensor, dict[str, Any]]],
        evaluate: Callable[[torch.nn.Module], dict[str, float]] | None = None,
        after_evaluation: Callable[[dict], bool] | None = None,
        out_dir: str | os.PathLike | None = None,
        save_model: Callable[[torch.nn.Module, Path], None] | None = None,
        load_model: Callable[[torch.nn.Module, Path], None] | None = None,
        checkpoints: bool = True,
        eval_split: str = "eval",
        annotate: Callable[[int], dict] | None = None,
        progress: bool = True,
        accelerator=None,
    ):
        self.config = config
        self.accelerator = accelerator or devices.make_accelerator(config.device, config.precision)
        self.device = self.accelerator.device
        self.main = self.accelerator.is_main_process
        self.slots = config.grad_accum * self.accelerator.num_processes
        self.model = model.float().to(self.device)  # fp32 weights whatever a checkpoint stored; autocast does the rest
        self.batch_for_step, self.evaluate_fn, self.after_evaluation = batch_for_step, evaluate, after_evaluation
        self.out_dir = Path(out_dir) if out_dir is not None else None
        if self.out_dir is not None and self.main:
            run_files.check_output_dir(self.out_dir)
        self.save_model = save_model or (lambda m, path: m.save_pretrained(path))
        self.load_model = load_model or (load_saved_weights if save_model is None else None)
        self.checkpoints, self.eval_split, self.progress = checkpoints, eval_split, progress
        self.annotate = annotate or (lambda step: {})
        self.sdpa = getattr(getattr(model, "config", None), "_attn_implementation", None) == "sdpa"
        self.tf32 = devices.enable_tf32() if self.device.type == "cuda" else False
        fused = {"fused": True} if self.device.type in ("cuda", "cpu") else {}  # one kernel, no per-tensor loop
        optimizer = torch.optim.AdamW(parameter_groups(self.model, config.weight_decay), lr=config.lr,
                                      betas=config.betas, eps=config.eps, **fused)
        self.module, self.optimizer = self.accelerator.prepare(_LossModule(self.model, compute_loss), optimizer)
        if config.compile:
            self.module = torch.compile(self.module, dynamic=True)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer.optimizer, linear_schedule(config.warmup_for(config.steps), config.steps))
        self.description = devices.describe_accelerator(self.accelerator, tf32=self.tf32, compiled=config.compile)
        self.step, self.metrics, self.stop_requested, self.last_eval_step = 0, [], False, -1
        self._running: dict[str, torch.Tensor] = {}  # sums since the last training row, on the device
        self._running_n, self._start, self._scale, self._lr = 0, time.perf_counter(), None, config.lr

    # ---- one step ------------------------------------------------------------------------------------------------
    def next_batches(self) -> list[Batch]:
        """This process's micro-batches of the current step, prepared on the host (see :func:`lean_batch`)."""
        first = self.accelerator.process_index * self.config.grad_accum
        return [lean_batch(self.batch_for_step(self.step, first + micro), sdpa=self.sdpa)
                for micro in range(self.config.grad_accum)]

    def train_step(self, batches: list[Batch] | None = None) -> dict[str, Any]:
        """One optimiser step over ``batches`` (default :meth:`next_batches`); values stay on the device."""
        cfg, acc = self.config, self.accelerator
        batches = self.next_batches() if batches is None else batches
        first = acc.process_index * cfg.grad_accum
        scale = acc.gradient_accumulation_steps / len(batches)  # accelerate divides by its own count
        self.module.train()
        totals: dict[str, Any] = {}
        for micro, batch in enumerate(batches):
            torch.manual_seed(dropout_seed(cfg.seed, self.step, first + micro))
            last = micro == len(batches) - 1
            with nullcontext() if last else acc.no_sync(self.module):
                loss, stats = self.module(to_device(batch, self.device))
                acc.backward(loss * scale)
            for key, value in {"loss": loss, **stats}.items():
                value = value.detach().float() if torch.is_tensor(value) else torch.tensor(float(value))
                totals[key] = totals.get(key, 0.0) + value / len(batches)
        if cfg.grad_clip is not None:
            totals["grad_norm"] = acc.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        totals["lr"] = self.scheduler.get_last_lr()[0]
        if acc.scaler is not None and self._scale is None:
            self._scale = acc.scaler.get_scale()  # the scale this step runs at (after a resume, the loaded one)
        self.optimizer.step()
        if not self._scaler_skipped():
            with warnings.catch_warnings():  # with a scaler accelerate wraps optimizer.step; torch takes it for a misuse
                warnings.filterwarnings("ignore", message="Seems like `optimizer.step", category=UserWarning)
                self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return totals

    def _scaler_skipped(self) -> bool:
        """fp16: whether the loss scaler skipped this step (an overflow), seen as a lower scale after it.

        Not ``optimizer.step_was_skipped``: with a fused optimizer accelerate reports every step as taken. Reading
        the scale waits for the GPU once a step, in fp16 (pre-Ampere GPUs) only; bf16 and fp32 have no scaler.
        """
        scaler = self.accelerator.scaler
        if scaler is None or not scaler.is_enabled():
            return False
        before, self._scale = self._scale, scaler.get_scale()
        return self._scale < before

    def run_step(self, batches: list[Batch] | None = None) -> None:
        """:meth:`train_step`, then the step's logging, evaluation and checkpoint."""
        cfg = self.config
        values = self.train_step(batches)
        for key, value in values.items():
            if key != "lr":
                self._running[key] = self._running.get(key, 0.0) + value
        self._running_n, self._lr = self._running_n + 1, values["lr"]
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
        sums = torch.stack([torch.as_tensor(value, device=self.device) for value in self._running.values()])
        if self.accelerator.num_processes > 1:
            sums = self.accelerator.reduce(sums, reduction="mean")
        return sums

    def _log_train(self) -> None:
        """Read the running means off the device (the only wait of a training step), averaged over processes."""
        means = (self._running_sums() / self._running_n).tolist()
        row = {"step": self.step, **self.annotate(self.step), "split": "train",
               **dict(zip(self._running, means, strict=True)), "lr": self._lr, "seconds": self.seconds()}
        self.log(row)
        self._running, self._running_n = {}, 0
        if self._bar is not None:
            self._bar.set_postfix(loss=f"{row['loss']:.3f}")

    def log(self, row: dict) -> None:
        self.metrics.append(row)
        if self.out_dir is not None and self.main:
            run_files.append_metrics(self.out_dir, row)

    def run_evaluation(self) -> dict[str, float]:
        """``evaluate`` on the plain model (no DDP, not compiled), logged; may request a stop."""
        self.last_eval_step = self.step
        if self.evaluate_fn is None:
            return {}
        with evaluation_mode(self.model), torch.no_grad(), self.accelerator.autocast():
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
        if self.accelerator.num_processes == 1:
            return late
        if self.step % self.config.log_every:  # processes agree at logging steps only (a wait)
            return False
        return bool(self.accelerator.reduce(torch.tensor(float(late), device=self.device), reduction="sum") > 0)

    # ---- the loop ------------------------------------------------------------------------------------------------
    def train(self, *, resume: bool = False) -> TrainResult:
        """Train to ``config.steps`` (or until ``config.minutes`` is spent or a stop is requested)."""
        cfg = self.config
        resumed = self.resume() if resume else False
        if not resumed and self.out_dir is not None and self.main:
            run_files.rewrite_metrics(self.out_dir, [])
        self._start = time.perf_counter()
        self._bar = tqdm(total=cfg.steps, initial=self.step, disable=not (self.progress and self.main),
                         desc="training", leave=False)
        out_of_time = False
        while self.step < cfg.steps and not self.stop_requested:
            self.run_step()
            self._bar.update(1)
            if self._out_of_time():
                out_of_time = True
                break
        self._bar.close()
        self._bar = None
        if self._running_n:  # the steps since the last row: a budget or early stop within a logging window
            self._log_train()
        if self.last_eval_step != self.step:
            self.run_evaluation()
        if self.checkpoints and self.out_dir is not None:
            self.save_checkpoint()
        self.accelerator.wait_for_everyone()
        stopped = (out_of_time or self.stop_requested) and self.step < cfg.steps
        return TrainResult(self.step, stopped, time.perf_counter() - self._start, self.metrics, self.out_dir)

    _bar = None

    # ---- checkpoints ---------------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """The main process writes ``checkpoint-<step>`` atomically, then points ``latest`` at it."""
        if self.out_dir is None:
            raise ValueError("this loop has no out_dir: pass out_dir=... to save checkpoints")
        final = self.out_dir / f"checkpoint-{self.step}"
        running = {"sums": dict(zip(self._running, self._running_sums().cpu(), strict=True)) if self._running_n
                   else {}, "steps": self._running_n}  # every process reduces, the main one writes
        if self.main:
            _write_checkpoint(self, final, running)
        self.accelerator.wait_for_everyone()
        return final

    def latest_checkpoint(self) -> Path | None:
        if self.out_dir is None or not (self.out_dir / CHECKPOINT_POINTER).exists():
            return None
        return self.out_dir / (self.out_dir / CHECKPOINT_POINTER).read_text().strip()

    def trainer_state(self, running: dict | None = None) -> dict:
        """What resuming needs besides the weights: tensors, numbers and strings only (``weights_only`` loads it)."""
        scaler = self.accelerator.scaler
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None, "step": self.step,
                "running": running or {"sums": {}, "steps": 0}}

    def resume(self) -> bool:
        """Load the latest checkpoint in ``out_dir``; False when there is none."""
        checkpoint = self.latest_checkpoint()
        if checkpoint is None:
            return False
        _check_same_settings(checkpoint, self.config)
        if self.load_model is None:
            raise ValueError("this loop saves its model with a custom save_model: pass the matching load_model=... "
                             "to resume from its checkpoints")
        self.load_model(self.model, checkpoint / "model")
        state = torch.load(checkpoint / "trainer_state.pt", map_location=self.device, weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.accelerator.scaler is not None and state.get("scaler"):
            self.accelerator.scaler.load_state_dict(state["scaler"])
        self.step = state["step"]
        running = state.get("running", {"sums": {}, "steps": 0})  # older checkpoints: a window from here
        self._running = {key: value.to(self.device) for key, value in running["sums"].items()}
        self._running_n = running["steps"]
        if self.out_dir is not None and (self.out_dir / run_files.METRICS_FILE).exists():
            self.metrics = [m for m in run_files.read_metrics(self.out_dir) if m["step"] <= self.step]
            self.accelerator.wait_for_everyone()
            if self.main:
                run_files.rewrite_metrics(self.out_dir, self.metrics)
        return True



def _write_checkpoint(loop: TrainLoop, final: Path, running: dict) -> None:
    out = loop.out_dir
    temp = Path(tempfile.mkdtemp(dir=out, prefix=f".{final.name}-"))
    loop.save_model(loop.model, temp / "model")
    torch.save(loop.trainer_state(running), temp / "trainer_state.pt")
    run_files.write_json_atomic(temp / "config.json", asdict(loop.config))
    if final.exists():
        shutil.rmtree(final)
    os.replace(temp, final)
    previous = loop.latest_checkpoint()
    run_files.write_text_atomic(out / CHECKPOINT_POINTER, final.name)
    if previous is not None and previous != final and previous.exists():
        shutil.rmtree(previous)


def _check_same_settings(checkpoint: Path, config: TrainConfig) -> None:
    saved = json.loads((checkpoint / "config.json").read_text())
    for key in ("steps", "batch_size", "grad_accum", "lr", "seed"):
        if saved[key] != getattr(config, key) and not (key == "lr" and math.isclose(saved[key], config.lr)):
            raise ValueError(
                f"the checkpoint in {checkpoint} was trained with {key}={saved[key]!r}, not "
                f"{getattr(config, key)!r}: resume with the same settings or use another --out"
            )


def load_saved_weights(model: torch.nn.Module, folder: Path) -> None:
    """Load what ``model.save_pretrained(folder)`` wrote into ``model`` (tied weights may be left out)."""
    from safetensors.torch import load_file

    if not (folder / "model.safetensors").exists():
        raise FileNotFoundError(f"no model.safetensors in {folder}: was it written by save_pretrained?")
    weights = load_file(folder / "model.safetensors", device=str(next(model.parameters()).device))
    own, tied = model.state_dict(), set(getattr(model, "_tied_weights_keys", None) or {})
    reshaped = [k for k, w in weights.items() if k in own and own[k].shape != w.shape]
    missing, unexpected = ([], []) if reshaped else model.load_state_dict(weights, strict=False)
    if reshaped or unexpected or [k for k in missing if k not in tied and "decoder.weight" not in k]:
        raise ValueError(f"the checkpoint in {folder.parent} does not fit this model (other shapes {reshaped[:3]}, "
                         f"missing {missing[:3]}, unexpected {unexpected[:3]}): use the configuration it was trained with")


def cycle_batches(n_examples: int, batch_size: int, seed: int) -> Callable[[int, int], torch.Tensor]:
    """Indices of the examples in micro-batch ``(step, micro)``: a fresh permutation per epoch, by seed."""
    check_enough_examples(n_examples, batch_size)
    per_epoch = n_examples // batch_size

    def indices(step: int, micro: int = 0, grad_accum: int = 1) -> torch.Tensor:
        epoch, position = divmod(step * grad_accum + micro, per_epoch)
        order = torch.randperm(n_examples, generator=step_generator(seed, epoch, stream=7))
        return order[position * batch_size : (position + 1) * batch_size]

    return indices


def check_enough_examples(n_examples: int, batch_size: int) -> None:
    """At least one full batch, or a ValueError saying what to change."""
    if n_examples < batch_size:
        raise ValueError(f"only {n_examples} examples for a batch of {batch_size}: use a smaller batch or more data")


def epoch_of(step: int, micro: int, grad_accum: int, n_examples: int, batch_size: int) -> int:
    """The epoch (pass over the examples) that micro-batch ``(step, micro)`` of :func:`cycle_batches` belongs to."""
    return (step * grad_accum + micro) // (n_examples // batch_size)


def iterate_in_batches(n: int, batch_size: int) -> Iterator[slice]:
    """Slices covering ``range(n)`` in order, for evaluation."""
    for begin in range(0, n, batch_size):
        yield slice(begin, min(n, begin + batch_size))
