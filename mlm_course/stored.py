"""The course's stored results: what a notebook reads instead of re-running hours of training.

A notebook reads ``results/NAME`` beside it (:func:`results_file`: the records of its long runs), a run's
``metrics.jsonl`` (:func:`read_metrics`: one row per log line of the training loop) and the benchmarks' results
(:func:`benchmark_result`). The wheel carries all three (pyproject.toml's ``data-files``: the notebooks and their
results install to ``share/mlm_course/notebooks`` under the environment's prefix, the benchmarks' results beside
them); in a clone with an editable install they are read from ``notebooks/`` and ``benchmarks/results/``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import mlm_course

NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
_PACKAGED = ("share", "mlm_course", "notebooks")
METRICS_FILE = "metrics.jsonl"
"""The training loop's log in a run's folder: one JSON object per line."""


def notebooks_folder() -> Path:
    """Where this installation's notebooks are: the clone's ``notebooks/`` for an editable install, else the copy
    the wheel installed (found through the distribution's record of its files)."""
    clone = Path(mlm_course.__file__).resolve().parents[1]
    if (clone / "pyproject.toml").is_file() and any((clone / "notebooks").glob(NOTEBOOK_GLOB)):
        return clone / "notebooks"
    try:
        files = importlib.metadata.distribution("mlm_course").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if tuple(file.parts[-4:-1]) == _PACKAGED and file.name.endswith(".ipynb"):
            return Path(file.locate()).resolve().parent
    raise FileNotFoundError("this installation of mlm_course has no notebooks: reinstall it from its wheel "
                            "(`pip install --force-reinstall mlm_course`)")


def results_file(name: str) -> Path:
    """A stored results file a notebook reads: ``results/NAME`` in the notebook's folder (the kernel's working
    directory), or, for the Chinese edition in ``zh/``, in the folder above it, beside the English notebooks."""
    candidates = [Path("results") / name]
    if Path.cwd().name == "zh":
        candidates.append(Path("..") / "results" / name)
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"{' or '.join(map(str, candidates))} does not exist (working directory {Path.cwd()}): "
                            "open the notebook from the course's notebooks folder (the Chinese edition from its zh/ "
                            "folder), or run its first cell, which copies the stored results here")


def benchmark_result(name: str) -> dict | None:
    """The stored result ``benchmarks/results/NAME`` (a JSON file a benchmark or the GPU check wrote) of this
    installation, read; None where it was never measured (the GPU check without a GPU, say)."""
    path = notebooks_folder().parent / "benchmarks" / "results" / name
    return json.loads(path.read_text()) if path.is_file() else None


def read_metrics(out_dir: str | os.PathLike) -> list[dict]:
    """The metrics log of a run, one dict per line."""
    path = Path(out_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {METRICS_FILE} in {out_dir}: is this a training output folder?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
