"""What a training run does beside the lessons' loop, :func:`mlm_course.train.train_with_accelerate`, which hands
it every logged row and every finished step: the output folder's ``metrics.jsonl``, checkpoints written through
Accelerate's ``save_state`` and resumed with ``load_state``, and a progress bar.

A checkpoint is ``accelerator.save_state`` — the weights, the optimiser, the schedule, the loss scale, the loop's
:class:`~mlm_course.train.Record` (its rows, the loss since the last row, the best evaluation and its weights) and
every process's random state — plus the run's settings and the model's configuration, written to a temporary folder
and renamed into place, so a run killed at any moment leaves the previous checkpoint whole.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import torch
from tqdm.auto import tqdm  # a widget bar in Jupyter (ipywidgets), text elsewhere
from transformers import BertConfig

from mlm_course.lab.run_files import (
    append_metrics,
    check_output_dir,
    rewrite_metrics,
    write_json_atomic,
    write_text_atomic,
)
from mlm_course.models import CONFIGS, size_of

CHECKPOINT_POINTER = "latest_checkpoint.txt"
SETTINGS_FILE = "settings.json"
#: The settings a resumed run must share with the run it continues (it replays the same batches and schedule).
RESUME_SETTINGS = ("steps", "batch_size", "grad_accum", "lr", "seed")
#: The numbers of a BERT configuration that fix its weights' shapes.
SHAPE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                "max_position_embeddings")


class TrainingRun:
    """The rows of a run in ``out_dir/metrics.jsonl`` (no files without ``out_dir``), a checkpoint every
    ``save_every`` steps and after the last (none when None), ``resume=True`` to continue from the latest one —
    refused when :data:`RESUME_SETTINGS` of ``settings`` differ or the model has another shape — and a progress bar
    (``progress``). Only the main process writes; every process loads. The folder is created (and proved writable)
    here. Subclasses may stop a run early (:meth:`should_stop`)."""

    def __init__(self, out_dir: str | os.PathLike | None = None, *, save_every: int | None = None,
                 settings: dict | None = None, resume: bool = False, progress: bool = False):
        if out_dir is None and (save_every or resume):
            raise ValueError("checkpoints need an output folder: pass out_dir=... (or save_every=None, resume=False)")
        self.out = None if out_dir is None else check_output_dir(out_dir)
        self.save_every, self.settings, self.resuming, self.progress = save_every, settings or {}, resume, progress

    def start(self, accelerator, model: torch.nn.Module, record, steps: int) -> None:
        """Called by the loop before its first step with what it trains: the prepared ``accelerator``, the plain
        ``model`` and its ``record``; loads the latest checkpoint when resuming (then ``record.steps`` are done)."""
        self.accelerator, self.model, self.record, self.steps = accelerator, model, record, steps
        self.main = accelerator.is_main_process
        checkpoint = self.latest() if self.resuming else None
        if checkpoint is not None:
            check_same_settings(checkpoint, self.settings)
            check_same_shape(model, checkpoint)
            accelerator.load_state(checkpoint)
        if self.out is not None and self.main:
            rewrite_metrics(self.out, record.history)  # a resumed run drops the rows after its checkpoint
        self.bar = tqdm(total=steps, initial=record.steps, disable=not (self.progress and self.main),
                        desc="training", leave=False)

    def log(self, row: dict) -> None:
        if self.out is not None and self.main:
            append_metrics(self.out, row)
        if row["split"] == "train":
            self.bar.set_postfix(loss=f"{row['loss']:.3f}")

    def after_step(self, step: int) -> bool:
        """After each step (its rows logged): the progress bar, a checkpoint when due; True stops the run."""
        self.bar.update(1)
        stop = self.should_stop(step)
        if self.save_every and (step % self.save_every == 0 or step == self.steps or stop):
            self.save(step)
        if stop or step == self.steps:
            self.bar.close()
        return stop

    def should_stop(self, step: int) -> bool:
        return False

    def latest(self) -> Path | None:
        pointer = self.out / CHECKPOINT_POINTER
        return self.out / pointer.read_text().strip() if pointer.exists() else None

    def save(self, step: int) -> Path:
        """``checkpoint-<step>``, written whole or not at all; the previous one is removed once it is in place."""
        accelerator = self.accelerator
        final, temp = self.out / f"checkpoint-{step}", self.out / f".checkpoint-{step}.partial"
        if self.main:
            shutil.rmtree(temp, ignore_errors=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(temp)  # every process its random state, the main process the rest
        accelerator.wait_for_everyone()
        if self.main:
            config = getattr(self.model, "config", None)
            if hasattr(config, "to_json_file"):
                config.to_json_file(temp / "config.json")  # the model's shape, checked on resume
            write_json_atomic(temp / SETTINGS_FILE, self.settings)
            previous = self.latest()
            shutil.rmtree(final, ignore_errors=True)
            os.replace(temp, final)
            write_text_atomic(self.out / CHECKPOINT_POINTER, final.name)
            if previous is not None and previous != final and previous.exists():
                shutil.rmtree(previous)
        accelerator.wait_for_everyone()
        return final


def check_same_settings(checkpoint: Path, settings: dict) -> None:
    """A resumed run must continue the run it resumes: the same steps, batches, learning rate and seed."""
    saved = json.loads((checkpoint / SETTINGS_FILE).read_text())
    for key in RESUME_SETTINGS:
        old, new = saved.get(key), settings.get(key)
        if old != new and not (key == "lr" and None not in (old, new) and math.isclose(old, new)):
            raise ValueError(f"the checkpoint in {checkpoint} was trained with {key}={old!r}, not {new!r}: resume "
                             f"with the same settings or use another --out")


def describe_shape(config: BertConfig) -> str:
    """A BERT configuration as a reader compares two: ``tiny (hidden 128, 2 layers, vocabulary 8,192)``."""
    layers = config.num_hidden_layers
    return (f"{size_of(config)} (hidden {config.hidden_size}, {layers} layer{'s' * (layers != 1)}, "
            f"vocabulary {config.vocab_size:,})")


def check_same_shape(model: torch.nn.Module, checkpoint: Path) -> None:
    """The model saved in ``checkpoint`` (its ``config.json``) must have the shape of ``model``: else an error that
    names both shapes and what to change."""
    own = getattr(model, "config", None)
    if not isinstance(own, BertConfig) or not (checkpoint / "config.json").exists():
        return
    saved = BertConfig.from_pretrained(checkpoint)
    if all(getattr(saved, name) == getattr(own, name) for name in SHAPE_FIELDS):
        return
    size = size_of(saved)
    if saved.vocab_size != own.vocab_size:
        fix = "resume with the tokenizer it was trained with"
    elif size in CONFIGS and size != size_of(own):
        fix = f"resume with --size {size}"
    else:
        fix = "resume with the model configuration it was trained with"
    raise ValueError(f"the checkpoint in {checkpoint} is {describe_shape(saved)} but this run builds "
                     f"{describe_shape(own)}: {fix} or start a new --out")
