"""The files of a run's output folder: written atomically (:mod:`mlm_course.atomic`), so a reader or a killed run
never sees half a file or half a model; the metrics log; a folder checked writable before any work starts; the record
of a complete run.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlm_course.atomic import write_file_atomic
from mlm_course.stored import METRICS_FILE


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    write_file_atomic(path, lambda temp: temp.write_text(text))


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path``, atomically: readers never see half a file."""
    write_text_atomic(path, json.dumps(data, indent=2))


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
    """A complete run (``mlm-course pretrain`` or ``finetune``): the trained model, its tokenizer, the loop's
    result and the results.json summary (None on processes other than the main one)."""

    model: Any
    tokenizer: Any
    train: Any
    summary: dict | None

