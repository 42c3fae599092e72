"""Make the set-up cell the first cell of every notebook:   python scripts/sync_first_cell.py

The cell's text lives here and nowhere else; tests/test_first_cell.py fails when a notebook's first cell differs
from it. The cell makes any Jupyter ready for the course (Colab, Kaggle, a workshop JupyterHub): where
``mlm_course`` is importable it only prints the device it found; elsewhere it installs the course from the one
source that pyproject.toml names (``[project.urls] Source``; the environment variable ``MLM_COURSE_SOURCE``, a pip
requirement or a wheel file, overrides it), keeping the torch already there (see ``mlm_course.lab.setup``).

Only cell 0 of ``notebooks/NN_*.ipynb`` (and ``notebooks/zh/NN_*.ipynb``) is written: inserted where missing,
replaced without outputs where its text differs, left alone (outputs and all) where it is already current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CELL_ID = "course-setup"
TEMPLATE = '''\
# Set-up, run it first: where the course is installed it only names the device; elsewhere (Colab, Kaggle, a
# JupyterHub) it installs the course, keeping the torch already here. MLM_COURSE_SOURCE can name a wheel instead.
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("mlm_course") is None:
    source = os.environ.get("MLM_COURSE_SOURCE", "mlm_course @ git+SOURCE_URL")
    print(f"installing the course from {source} (a minute or two)")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", source]
    if subprocess.run(pip, capture_output=True).returncode != 0:
        raise RuntimeError(f"could not install the course from {source} (is this machine offline?): install "
                           "mlm_course with pip where there is a network, or from its wheel file, then rerun this cell")
    importlib.invalidate_caches()
    from mlm_course.lab.setup import finish_install

    finish_install(loaded=sys.modules)  # dependencies, MiniLM, stored results; asks for a restart if needed
from mlm_course.settings import device_line

print(device_line())'''


def source_url(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The course's source repository: ``[project.urls] Source`` of pyproject.toml."""
    return tomllib.loads(pyproject.read_text())["project"]["urls"]["Source"]


def first_cell_source(url: str) -> str:
    """The first cell's text, installing from ``url``."""
    return TEMPLATE.replace("SOURCE_URL", url)


def notebook_paths(root: Path = ROOT) -> list[Path]:
    """The course's notebooks, translations included."""
    return sorted(root.glob("notebooks/[0-9][0-9]_*.ipynb")) + sorted(root.glob("notebooks/zh/[0-9][0-9]_*.ipynb"))


def with_first_cell(notebook: dict, source: str) -> dict:
    """``notebook`` with the set-up cell (text ``source``) as cell 0; other cells untouched."""
    cells = notebook["cells"]
    current = cells[0] if cells and cells[0].get("id") == CELL_ID else None
    if current is not None and "".join(current["source"]) == source:
        return notebook
    cell = {"cell_type": "code", "execution_count": None, "id": CELL_ID, "metadata": {}, "outputs": [],
            "source": source.splitlines(keepends=True)}
    return {**notebook, "cells": [cell, *(cells[1:] if current is not None else cells)]}


def dumps(notebook: dict) -> str:
    """The notebook as Jupyter writes it (one-space indent, sorted keys, UTF-8, final newline)."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(root: Path = ROOT) -> int:
    source = first_cell_source(source_url(root / "pyproject.toml"))
    for path in notebook_paths(root):
        text = path.read_text(encoding="utf-8")
        updated = dumps(with_first_cell(json.loads(text), source))
        if updated != text:
            path.write_text(updated, encoding="utf-8")
            print(f"updated {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
