"""The course's notebooks where a learner can open them: ``mlm-course notebooks DEST``.

The wheel carries the notebooks (with their stored outputs) and the results files they read, built from the
repository's ``notebooks/`` (pyproject.toml's ``data-files``: they install to ``share/mlm_course/notebooks`` under
the environment's prefix), and the benchmarks' results beside them (``share/mlm_course/benchmarks/results``, from
``benchmarks/results/``). In a clone with an editable install they are read from ``notebooks/`` and
``benchmarks/results/`` themselves.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import mlm_course
from mlm_course.stored import NOTEBOOK_GLOB, notebooks_folder

NOTEBOOK_GLOBS = (NOTEBOOK_GLOB, "results/*.json", "zh/" + NOTEBOOK_GLOB, "zh/GLOSSARY.md")


def course_files(source: Path) -> list[Path]:
    """The files to copy, relative to ``source``: the notebooks, their results files, translations if present."""
    return sorted(path.relative_to(source) for pattern in NOTEBOOK_GLOBS for path in source.glob(pattern))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _nearest_existing(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def check_destination(dest: Path, source: Path) -> None:
    """Refuse, with one sentence, a ``dest`` that is a file, unwritable, or inside the installed package or the
    notebooks' own folder (a learner's edits there would be lost to the next install)."""
    dest = dest.expanduser().resolve()
    for folder in (Path(mlm_course.__file__).resolve().parent, source.resolve()):
        if _inside(dest, folder):
            raise ValueError(f"{dest} is inside the installed course ({folder}), which the next install replaces: "
                             "copy the notebooks to a folder of your own, e.g. ~/mlm_course_notebooks")
    existing = _nearest_existing(dest)
    if not existing.is_dir():
        raise ValueError(f"{existing} is a file, not a folder: choose another destination for the notebooks")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write to {existing}: choose a folder you can write to, e.g. "
                              "~/mlm_course_notebooks")


def edited_copies(source: Path, dest: Path, files: list[Path]) -> list[Path]:
    """The files of ``files`` that exist in ``dest`` with contents other than the packaged ones (a learner's edits
    or outputs)."""
    return [name for name in files
            if (dest / name).exists() and (dest / name).read_bytes() != (source / name).read_bytes()]


def copy_notebooks(dest: Path, *, force: bool = False, source: Path | None = None) -> list[Path]:
    """Copy the course's notebooks and results files into ``dest``; returns the files written (relative paths).
    Every check comes before the first write: a bad ``dest`` or, without ``force``, an edited copy there is refused."""
    source = notebooks_folder() if source is None else source
    files = course_files(source)
    check_destination(dest, source)
    edited = edited_copies(source, dest, files)
    if edited and not force:
        names = ", ".join(str(name) for name in edited[:3]) + (f" and {len(edited) - 3} more" if len(edited) > 3 else "")
        raise ValueError(f"{dest} already holds edited copies of {names}: copy to another folder, or pass --force to "
                         "overwrite them with the course's versions")
    written = [name for name in files if not (dest / name).exists() or name in edited]
    for name in written:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, dest / name)
    return written


def copy_results(folder: Path) -> list[Path]:
    """Copy the stored results files the notebooks read (``results/*.json``) into ``folder`` where missing, for a
    notebook opened on its own (Colab); returns the files written. Existing files are never touched."""
    source = notebooks_folder()
    missing = [name for name in source.glob("results/*.json") if not (folder / name.relative_to(source)).exists()]
    for path in missing:
        (folder / "results").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder / path.relative_to(source))
    return [path.relative_to(source) for path in missing]
