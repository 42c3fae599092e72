"""Writing files and folders so that a reader — or a run killed half-way — never sees half of one: everything is
written under a temporary name beside its place, then renamed over it (a rename within one file system is atomic).
The one implementation of it, for the model folders :mod:`mlm_course.bert_io` writes and the run files of
:mod:`mlm_course.lab.run_files`. It sits with the lessons because ``save_pretrained`` in :mod:`mlm_course.bert_io`
needs it, and lessons never import the machinery.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_files_atomic(writes: dict[Path, Callable[[Path], None]], *, key: Path | None = None) -> None:
    """``writes[path](temporary)`` fills a temporary file beside each ``path``; once all are written they are
    renamed into place. ``key``, the file that makes the set usable (a model folder's ``config.json``), is removed
    first and renamed last, so a write killed at any point leaves the old files, or a set without ``key``, or the
    new files — never new files beside an old ``key``, nor half a file. A failed write changes nothing."""
    temps: dict[Path, Path] = {}
    try:
        for path, write in writes.items():
            handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
            os.close(handle)
            temps[Path(path)] = Path(temp)
            write(Path(temp))
        if key is not None:
            Path(key).unlink(missing_ok=True)
        for path in sorted(temps, key=lambda path: path == key):
            os.replace(temps[path], path)
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)


def write_file_atomic(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """``write(temporary)`` fills a temporary file beside ``path``, which then replaces ``path``."""
    write_files_atomic({Path(path): write})
    return Path(path)


def write_folder_atomic(folder: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """``write(temporary)`` fills a temporary folder beside ``folder``, which then replaces ``folder`` by renames:
    a reader sees the old folder or the new one, never a half-written one (a failed write leaves no trace)."""
    final = Path(folder)
    temp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}-"))
    try:
        write(temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    previous = final.parent / f".{final.name}-previous"
    shutil.rmtree(previous, ignore_errors=True)  # left by a run killed between the two renames
    if final.exists():
        os.replace(final, previous)
    os.replace(temp, final)
    shutil.rmtree(previous, ignore_errors=True)
    return final
