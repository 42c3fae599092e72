"""Every public function and class of mlm_course is used (notebook, script, benchmark, the package) and reached by
a test (scripts/check_public_api.py)."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import check_public_api  # noqa: E402


def test_every_public_name_is_used_and_tested():
    found = check_public_api.problems()
    assert not found, "\n".join(found) + "\nuse it or delete it (or make it private); name it in a test"


def _project(tmp_path: Path, package: str, tests: str, notebook: str = "") -> Path:
    (tmp_path / "mlm_course").mkdir()
    (tmp_path / "mlm_course" / "a.py").write_text(package)
    for folder in ("tests", "notebooks", "scripts", "benchmarks"):
        (tmp_path / folder).mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_a.py").write_text(tests)
    cell = {"cell_type": "code", "source": [notebook], "metadata": {}, "outputs": [], "execution_count": None}
    (tmp_path / "notebooks" / "01_a.ipynb").write_text(json.dumps({"cells": [cell]}))
    return tmp_path


def test_unused_and_untested_names_are_found_and_a_call_chain_counts_as_tested(tmp_path):
    package = ("def step():\n    return 1\n\n\ndef fit():\n    return step()\n\n\n"
               "def orphan():\n    return 2\n\n\ndef _private():\n    return 3\n")
    project = _project(tmp_path, package, tests="from mlm_course.a import fit\nfit()\n", notebook="a.fit()")
    assert check_public_api.problems(project) == [
        "mlm_course/a.py: orphan is used by no notebook, script, benchmark or module",
        "mlm_course/a.py: orphan is reached by no test",
    ]  # step is used by fit and tested through it; fit is used by the notebook; _private is not reported
