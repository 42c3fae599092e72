"""The files of a run's output folder: written atomically (:mod:`mlm_course.atomic`), so a reader or a killed run
never sees half a file or half a model; the metrics log; a folder checked writable before any work starts; the
checkpoints :func:`mlm_course.train.train_with_accelerate` saves and resumes from (:class:`RunFolder`); the record of
a complete run.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mlm_course.atomic import write_file_atomic

METRICS_FILE = "metrics.jsonl"
"""The training loop's log in an output folder: one JSON object per line."""
CHECKPOINT_POINTER = "latest_checkpoint.txt"
SETTINGS_FILE = "settings.json"
#: The settings a resumed run must share with the run it continues (it replays the same batches and schedule).
RESUME_SETTINGS = ("steps", "batch_size", "grad_accum", "lr", "seed")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    write_file_atomic(path, lambda temp: temp.write_text(text))


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path``, atomically: readers never see half a file."""
    write_text_atomic(path, json.dumps(data, indent=2))


def read_metrics(out_dir: str | os.PathLike) -> list[dict]:
    """The metrics log of a run, one dict per line."""
    path = Path(out_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {METRICS_FILE} in {out_dir}: is this a training output folder?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_metrics(out_dir: str | os.PathLike, row: dict) -> None:
    """Add ``row`` to the metrics log of ``out_dir`` (one line; the file is created if needed)."""
    with open(Path(out_dir) / METRICS_FILE, "a") as handle:
        handle.write(json.dumps(row) + "\n")


def rewrite_metrics(out_dir: str | os.PathLike, rows: list[dict]) -> None:
    """Replace the metrics log of ``out_dir`` by ``rows``, atomically (a resumed run drops the rows after its
    checkpoint)."""
    write_text_atomic(Path(out_dir) / METRICS_FILE, "".join(json.dumps(row) + "\n" for row in rows))


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
class RunResult:
    """A complete run (``mlm-course pretrain`` or ``finetune``): the trained model, its tokenizer, the runner's
    result and the results.json summary (None on processes other than the main one)."""

    model: Any
    tokenizer: Any
    train: Any
    summary: dict | None


class RunFolder:
    """What a run writes beside the loop, in ``out_dir``: each logged row in ``metrics.jsonl``, and a checkpoint
    every ``save_every`` steps and after the last — ``accelerator.save_state`` (the weights, optimiser, schedule,
    loss scale, the loop's record and every process's random state) written to a temporary folder and renamed
    into place, so a killed run leaves the previous checkpoint whole. ``settings`` (a dict) is stored with each
    checkpoint; ``resume=True`` continues from the latest one, refused if :data:`RESUME_SETTINGS` differ;
    ``check_model(model, checkpoint)`` may refuse a model of another shape before loading; ``progress`` prints each
    row as it is logged. Only the main process
    writes; every process loads. The folder is created (and proved writable) here."""

    def __init__(self, out_dir: str | os.PathLike, *, save_every: int, settings: dict, resume: bool = False,
                 check_model=None, progress: bool = False):
        self.out, self.save_every, self.settings = check_output_dir(out_dir), save_every, settings
        self.resuming, self.check_model, self.progress = resume, check_model, progress

    def log(self, row: dict) -> None:
        from accelerate import PartialState

        if PartialState().is_main_process:
            append_metrics(self.out, row)
            if self.progress:
                print(" ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                               for key, value in row.items()), flush=True)

    def latest(self) -> Path | None:
        pointer = self.out / CHECKPOINT_POINTER
        return self.out / pointer.read_text().strip() if pointer.exists() else None

    def resume(self, accelerator, model: torch.nn.Module, record) -> bool:
        """Load the latest checkpoint into the objects ``accelerator`` prepared (``model``, unwrapped) or was given
        for checkpointing (the loop's ``record``); False (and a fresh metrics file) when not resuming or there is
        none. The run saves ``model`` and ``record`` from now on."""
        self.model, self.record = model, record
        checkpoint = self.latest() if self.resuming else None
        if checkpoint is None:
            if accelerator.is_main_process:
                rewrite_metrics(self.out, [])
            return False
        check_same_settings(checkpoint, self.settings)
        if self.check_model is not None:
            self.check_model(model, checkpoint)
        accelerator.load_state(checkpoint)
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            rewrite_metrics(self.out, record.history)  # rows after the checkpoint were not kept
        return True

    def after_step(self, accelerator, step: int, last: int) -> None:
        if step % self.save_every == 0 or step == last:
            self.save(accelerator, step)

    def save(self, accelerator, step: int) -> Path:
        """``checkpoint-<step>``, written whole or not at all; the previous one is removed once it is in place."""
        final, temp = self.out / f"checkpoint-{step}", self.out / f".checkpoint-{step}.partial"
        if accelerator.is_main_process:
            shutil.rmtree(temp, ignore_errors=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(temp)  # every process its random state, the main process the rest
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
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
        if old != new and not (key == "lr" and old is not None and new is not None and math.isclose(old, new)):
            raise ValueError(f"the checkpoint in {checkpoint} was trained with {key}={old!r}, not {new!r}: resume "
                             f"with the same settings or use another --out")
