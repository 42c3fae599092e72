"""The notebooks' first cell (scripts/sync_first_cell.py holds its text): identical in every notebook, inserted by
the sync script without touching other cells, silent but for the device line where the course is installed, and
the device line itself on CUDA, Apple's MPS and the CPU (simulated). The cell installing the course where it is
missing, and failing offline, runs in a fresh environment in tests/test_fresh_install.py."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlm_course import precision, settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import sync_first_cell  # noqa: E402

CELL = sync_first_cell.first_cell_source(sync_first_cell.source_url())


def run_cell(python: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The first cell run by ``python`` in ``cwd`` as a notebook kernel would run it (plain Python, no magics)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLM_COURSE_SOURCE")}
    return subprocess.run([python, "-c", CELL], cwd=cwd, env={**environ, **env}, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("path", sync_first_cell.notebook_paths(), ids=lambda p: p.name)
def test_every_notebook_starts_with_the_set_up_cell(path):
    first = json.loads(path.read_text())["cells"][0]
    assert first["cell_type"] == "code" and first.get("id") == sync_first_cell.CELL_ID, (
        f"{path.name}: run `python scripts/sync_first_cell.py`")
    assert "".join(first["source"]) == CELL, f"{path.name}: its first cell differs; run scripts/sync_first_cell.py"


def test_the_cell_installs_from_pyprojects_source_and_is_short():
    url = sync_first_cell.source_url()
    assert f'"mlm_course @ git+{url}"' in CELL and url.startswith("https://")
    assert len(CELL.splitlines()) <= 22


def _notebook(*sources: str) -> dict:
    cells = [{"cell_type": "markdown", "id": "title", "metadata": {}, "source": ["# Title"]}]
    cells += [{"cell_type": "code", "execution_count": 3, "id": f"c{i}", "metadata": {}, "source": [source],
               "outputs": [{"name": "stdout", "output_type": "stream", "text": ["out"]}]}
              for i, source in enumerate(sources)]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_sync_inserts_the_cell_first_without_outputs_and_leaves_the_other_cells_alone():
    notebook = _notebook("x = 1")
    synced = sync_first_cell.with_first_cell(notebook, "print(1)\nprint(2)")
    assert synced["cells"][1:] == notebook["cells"]
    assert synced["cells"][0] == {"cell_type": "code", "execution_count": None, "id": "course-setup", "metadata": {},
                                  "outputs": [], "source": ["print(1)\n", "print(2)"]}


def test_sync_replaces_an_outdated_cell_and_keeps_a_current_one_with_its_outputs():
    old = sync_first_cell.with_first_cell(_notebook("x = 1"), "print('old')")
    old["cells"][0]["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["GPU: H200"]}]
    assert sync_first_cell.with_first_cell(old, "print('old')") is old
    new = sync_first_cell.with_first_cell(old, "print('new')")
    assert len(new["cells"]) == 3 and new["cells"][0]["source"] == ["print('new')"]
    assert new["cells"][0]["outputs"] == [] and new["cells"][1:] == old["cells"][1:]


def test_the_sync_script_changes_only_cell_0_of_each_notebook_and_a_second_run_nothing(tmp_path, capsys):
    (tmp_path / "notebooks" / "zh").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for path in sync_first_cell.notebook_paths():
        shutil.copy(path, tmp_path / "notebooks")
    shutil.copy(path, tmp_path / "notebooks" / "zh")  # a translation is synced too
    before = {path: json.loads(path.read_text()) for path in sync_first_cell.notebook_paths(tmp_path)}
    assert sync_first_cell.main(tmp_path) == 0
    for path, notebook in before.items():
        after = json.loads(path.read_text())
        first = notebook["cells"][0]
        current = first.get("id") == sync_first_cell.CELL_ID and "".join(first["source"]) == CELL
        assert "".join(after["cells"][0]["source"]) == CELL
        assert after["cells"][0]["outputs"] == (first["outputs"] if current else [])  # a current cell keeps them
        rest = notebook["cells"][1:] if first.get("id") == sync_first_cell.CELL_ID else notebook["cells"]
        assert after["cells"][1:] == rest and after["metadata"] == notebook["metadata"]
    assert len(capsys.readouterr().out.splitlines()) <= len(before)
    texts = {path: path.read_text() for path in before}
    sync_first_cell.main(tmp_path)
    assert capsys.readouterr().out == "" and texts == {path: path.read_text() for path in before}


def test_the_sync_script_writes_a_notebook_as_jupyter_does(tmp_path):
    """nbformat (Jupyter's writer) and the script's dumps give the same bytes, so a sync changes no other line."""
    import nbformat

    path = sync_first_cell.notebook_paths()[0]
    nbformat.write(nbformat.read(path, as_version=4), tmp_path / path.name)
    text = (tmp_path / path.name).read_text(encoding="utf-8")
    assert sync_first_cell.dumps(json.loads(text)) == text


def test_with_the_course_installed_the_cell_only_prints_the_device(tmp_path):
    """MLM_COURSE_SOURCE names nothing installable: the cell would fail if it tried to install."""
    done = run_cell(sys.executable, tmp_path, MLM_COURSE_SOURCE=str(tmp_path / "missing.whl"), MLM_COURSE_QUICK="1",
                    MLM_COURSE_DEVICE="cpu")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "CPU: expect the quick sizes\n"
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def no_device_override(monkeypatch):
    monkeypatch.delenv(precision.DEVICE_ENV_VAR, raising=False)


def test_device_line_on_apple_silicon_is_mps(monkeypatch, no_device_override):
    """Apple's backend simulated: torch says MPS is there and CUDA is not; the notebooks then run on "mps"."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert precision.pick_device().type == "mps"
    assert settings.device_line() == "Apple GPU (MPS)"


def test_device_line_names_the_cuda_gpu(monkeypatch, no_device_override):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert settings.device_line() == "GPU: NVIDIA H200"


@pytest.mark.parametrize(("quick", "expected"), [
    (True, "CPU: expect the quick sizes"),
    (False, "CPU: the full sizes, a few minutes for most notebooks (MLM_COURSE_QUICK=1 for the quick ones)"),
])
def test_device_line_on_a_cpu_says_which_sizes(monkeypatch, no_device_override, quick, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(settings, "SETTINGS", settings.Settings.quick_mode() if quick else settings.Settings.full())
    assert settings.device_line() == expected
