"""The training loop that pretraining and fine-tuning share.

AdamW with weight-decay groups, linear warm-up then linear decay, gradient clipping and accumulation, autocast
by device, a tqdm bar, periodic evaluation, a JSON-lines metrics log, and atomic checkpoints that a killed run
resumes from. Every random draw of step ``s`` comes from a generator seeded by ``(seed, s)``, so a resumed run
reaches exactly the weights of an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from mlm_course import device as devices

Batch = dict[str, torch.Tensor]
CHECKPOINT_POINTER = "latest_checkpoint.txt"
METRICS_FILE = "metrics.jsonl"


@dataclass
class TrainConfig:
    """Optimisation settings. ``warmup`` < 1 is a fraction of ``steps``, otherwise a step count."""

    steps: int = 1000
    batch_size: int = 32
    grad_accum: int = 1
    lr: float = 5e-4
    warmup: float = 0.06
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    grad_clip: float | None = 1.0
    eval_every: int = 200
    save_every: int = 500
    log_every: int = 10
    seed: int = 0
    device: str | None = None
    mixed_precision: bool = True
    minutes: float | None = None  # wall-clock budget: stop, save and report when it is spent
    extra: dict[str, Any] = field(default_factory=dict)  # recorded with the checkpoint (data, masking, …)

    def __post_init__(self):
        self.betas = tuple(self.betas)
        checks = {
            "steps": self.steps >= 1,
            "batch_size": self.batch_size >= 1,
            "grad_accum": self.grad_accum >= 1,
            "lr": self.lr > 0,
            "warmup": self.warmup >= 0,
            "eval_every": self.eval_every >= 1,
            "save_every": self.save_every >= 1,
            "log_every": self.log_every >= 1,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid training settings {bad}: steps, sizes and intervals must be ≥ 1, lr > 0")

    @property
    def warmup_steps(self) -> int:
        return int(self.warmup * self.steps) if self.warmup < 1 else int(self.warmup)


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    """The seed of draw ``stream`` at step ``step``: independent of how the run was interrupted."""
    return ((seed * 1_000_003 + step) * 101 + stream) % (2**63)


def step_generator(seed: int, step: int, stream: int = 0) -> torch.Generator:
    """A generator seeded with :func:`step_seed`."""
    return torch.Generator().manual_seed(step_seed(seed, step, stream))


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


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` through a temporary file and a rename: readers never see half a file."""
    path = Path(path)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        json.dump(data, handle, indent=2)
        temp = Path(handle.name)
    os.replace(temp, path)


def read_metrics(out_dir: str | os.PathLike) -> list[dict]:
    """The metrics log of a run, one dict per line."""
    path = Path(out_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {METRICS_FILE} in {out_dir}: is this a training output folder?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_output_dir(out_dir: str | os.PathLike) -> Path:
    """Create ``out_dir`` if needed and prove it is writable, with a clear error otherwise."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise PermissionError(f"cannot write to the output folder {out} ({exc.strerror}): choose another --out") from exc
    return out


@dataclass
class TrainResult:
    steps_done: int
    stopped_early: bool
    seconds: float
    metrics: list[dict]
    out_dir: Path | None


class Trainer:
    """Runs ``compute_loss(model, batch_for_step(step, micro))`` for ``config.steps`` optimiser steps.

    ``evaluate(model) -> dict`` runs every ``eval_every`` steps and at the end. With ``out_dir`` the trainer
    writes ``metrics.jsonl``, checkpoints every ``save_every`` steps, and ``resume=True`` continues from the
    latest checkpoint there.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        config: TrainConfig,
        *,
        batch_for_step: Callable[[int, int], Batch],
        compute_loss: Callable[[torch.nn.Module, Batch], tuple[torch.Tensor, dict[str, float]]],
        evaluate: Callable[[torch.nn.Module], dict[str, float]] | None = None,
        out_dir: str | os.PathLike | None = None,
        save_model: Callable[[torch.nn.Module, Path], None] | None = None,
        progress: bool = True,
    ):
        self.config = config
        self.choice = devices.choose(config.device, mixed_precision=config.mixed_precision)
        self.model = model.to(self.choice.device)
        self.batch_for_step = batch_for_step
        self.compute_loss = compute_loss
        self.evaluate_fn = evaluate
        self.out_dir = check_output_dir(out_dir) if out_dir is not None else None
        self.save_model = save_model or (lambda m, path: m.save_pretrained(path))
        self.progress = progress
        self.optimizer = torch.optim.AdamW(
            parameter_groups(model, config.weight_decay), lr=config.lr, betas=config.betas, eps=config.eps
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, linear_schedule(config.warmup_steps, config.steps)
        )
        self.scaler = torch.amp.GradScaler(self.choice.type, enabled=self.choice.needs_grad_scaler)
        self.step = 0
        self.metrics: list[dict] = []

    # ---- checkpoints ------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Write the full state to ``checkpoint-<step>`` atomically, then point ``latest`` at it."""
        if self.out_dir is None:
            raise ValueError("this trainer has no out_dir: pass out_dir=... to save checkpoints")
        final = self.out_dir / f"checkpoint-{self.step}"
        temp = Path(tempfile.mkdtemp(dir=self.out_dir, prefix=f".checkpoint-{self.step}-"))
        self.save_model(self.model, temp / "model")
        torch.save(
            {
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict(),
                "step": self.step,
            },
            temp / "trainer_state.pt",
        )
        write_json_atomic(temp / "config.json", asdict(self.config))
        if final.exists():
            shutil.rmtree(final)
        os.replace(temp, final)
        previous = self.latest_checkpoint()
        pointer = self.out_dir / CHECKPOINT_POINTER
        with tempfile.NamedTemporaryFile("w", dir=self.out_dir, delete=False) as handle:
            handle.write(final.name)
        os.replace(handle.name, pointer)
        if previous is not None and previous != final and previous.exists():
            shutil.rmtree(previous)
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
        saved = json.loads((checkpoint / "config.json").read_text())
        for key in ("steps", "batch_size", "grad_accum", "lr", "seed"):
            if saved[key] != getattr(self.config, key) and not (key == "lr" and math.isclose(saved[key], self.config.lr)):
                raise ValueError(
                    f"the checkpoint in {checkpoint} was trained with {key}={saved[key]!r}, not "
                    f"{getattr(self.config, key)!r}: resume with the same settings or use another --out"
                )
        from safetensors.torch import load_file

        weights = load_file(checkpoint / "model" / "model.safetensors", device=str(self.choice.device))
        missing, unexpected = self.model.load_state_dict(weights, strict=False)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or {})
        if unexpected or [k for k in missing if k not in tied and "decoder.weight" not in k]:
            raise ValueError(
                f"the checkpoint in {checkpoint} does not fit this model (missing {missing[:3]}, unexpected "
                f"{unexpected[:3]}): use the configuration it was trained with"
            )
        state = torch.load(checkpoint / "trainer_state.pt", map_location=self.choice.device, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.step = state["step"]
        if self.out_dir is not None and (self.out_dir / METRICS_FILE).exists():
            kept = [m for m in read_metrics(self.out_dir) if m["step"] <= self.step]
            self._rewrite_metrics(kept)
            self.metrics = kept
        return True

    # ---- metrics ------------------------------------------------------------------------------------------
    def _rewrite_metrics(self, rows: list[dict]) -> None:
        path = self.out_dir / METRICS_FILE
        with tempfile.NamedTemporaryFile("w", dir=self.out_dir, delete=False) as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        os.replace(handle.name, path)

    def log(self, row: dict) -> None:
        self.metrics.append(row)
        if self.out_dir is not None:
            with open(self.out_dir / METRICS_FILE, "a") as handle:
                handle.write(json.dumps(row) + "\n")

    def run_evaluation(self) -> dict[str, float]:
        if self.evaluate_fn is None:
            return {}
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad(), self.choice.autocast():
            result = self.evaluate_fn(self.model)
        self.model.train(was_training)
        self.log({"step": self.step, "split": "eval", **result})
        return result

    # ---- the loop ----------------------------------------------------------------------------------------
    def train_step(self) -> dict[str, float]:
        """One optimiser step (``grad_accum`` micro-batches); returns the logged values."""
        cfg = self.config
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        totals: dict[str, float] = {}
        for micro in range(cfg.grad_accum):
            torch.manual_seed(step_seed(cfg.seed, self.step, 1000 + micro))  # dropout
            batch = {k: v.to(self.choice.device) for k, v in self.batch_for_step(self.step, micro).items()}
            with self.choice.autocast():
                loss, stats = self.compute_loss(self.model, batch)
            self.scaler.scale(loss / cfg.grad_accum).backward()
            for key, value in {"loss": float(loss.detach()), **stats}.items():
                totals[key] = totals.get(key, 0.0) + value / cfg.grad_accum
        self.scaler.unscale_(self.optimizer)
        if cfg.grad_clip is not None:
            totals["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip))
        totals["lr"] = self.scheduler.get_last_lr()[0]
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.step += 1
        return totals

    def train(self, *, resume: bool = False) -> TrainResult:
        """Train to ``config.steps`` (or until ``config.minutes`` is spent), evaluating and checkpointing."""
        cfg = self.config
        if resume:
            self.resume()
        start = time.perf_counter()
        stopped_early = False
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not self.progress, desc="training", leave=False)
        running: dict[str, float] = {}
        while self.step < cfg.steps:
            values = self.train_step()
            bar.update(1)
            running = {k: running.get(k, 0.0) + v for k, v in values.items()}
            if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                count = cfg.log_every if self.step % cfg.log_every == 0 else self.step % cfg.log_every
                row = {k: v / count for k, v in running.items()}
                row["lr"] = values["lr"]
                self.log({"step": self.step, "split": "train", **row, "seconds": time.perf_counter() - start})
                bar.set_postfix(loss=f"{row['loss']:.3f}")
                running = {}
            if self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                self.run_evaluation()
            if self.out_dir is not None and self.step % cfg.save_every == 0 and self.step < cfg.steps:
                self.save_checkpoint()
            if cfg.minutes is not None and time.perf_counter() - start > 60 * cfg.minutes:
                stopped_early = self.step < cfg.steps
                break
        bar.close()
        self.run_evaluation()
        if self.out_dir is not None:
            self.save_checkpoint()
        return TrainResult(self.step, stopped_early, time.perf_counter() - start, self.metrics, self.out_dir)


def cycle_batches(n_examples: int, batch_size: int, seed: int) -> Callable[[int, int], torch.Tensor]:
    """Indices of the examples in micro-batch ``(step, micro)``: a fresh permutation per epoch, by seed."""
    if n_examples < batch_size:
        raise ValueError(f"only {n_examples} examples for a batch of {batch_size}: use a smaller batch or more data")
    per_epoch = n_examples // batch_size

    def indices(step: int, micro: int = 0, grad_accum: int = 1) -> torch.Tensor:
        epoch, position = divmod(step * grad_accum + micro, per_epoch)
        order = torch.randperm(n_examples, generator=step_generator(seed, epoch, stream=7))
        return order[position * batch_size : (position + 1) * batch_size]

    return indices


def epoch_of(step: int, micro: int, grad_accum: int, n_examples: int, batch_size: int) -> int:
    """The epoch (pass over the examples) that micro-batch ``(step, micro)`` of :func:`cycle_batches` belongs to."""
    return (step * grad_accum + micro) // (n_examples // batch_size)


def iterate_in_batches(n: int, batch_size: int) -> Iterator[slice]:
    """Slices covering ``range(n)`` in order, for evaluation."""
    for begin in range(0, n, batch_size):
        yield slice(begin, min(n, begin + batch_size))
