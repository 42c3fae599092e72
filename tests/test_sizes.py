"""House limits: no module over 500 lines, no function over 60 (scripts/check_sizes.py), and a list of today's
offenders that may only shrink."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import check_sizes  # noqa: E402

# The modules and functions over the limits when the limits were introduced, with their sizes then. A listed one may
# not grow; once it is within the limit it must be removed from this list (the test says so). Never add to it.
KNOWN_OFFENDERS = {
    "mlm_course/logprob.py": 507,
    "mlm_course/pretraining.py": 606,
    "mlm_course/training.py": 526,
}


def test_no_module_or_function_is_over_the_limits_except_known_offenders_that_do_not_grow():
    found = check_sizes.oversized()
    new = {name: size for name, size in found.items() if name not in KNOWN_OFFENDERS}
    assert not new, f"over the limits (500 lines a module, 60 a function): {new}; split them"
    grown = {name: (KNOWN_OFFENDERS[name], size) for name, size in found.items() if size > KNOWN_OFFENDERS.get(name, size)}
    assert not grown, f"known offenders grew (listed size, size now): {grown}"
    fixed = sorted(set(KNOWN_OFFENDERS) - set(found))
    assert not fixed, f"now within the limits, remove from KNOWN_OFFENDERS in tests/test_sizes.py: {fixed}"


def _package(tmp_path, files: dict[str, str]) -> Path:
    package = tmp_path / "pkg"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def _function(name: str, lines: int, indent: str = "") -> str:
    """A function of exactly ``lines`` lines (its ``def`` included)."""
    return f"{indent}def {name}():\n" + f"{indent}    x = 1\n" * (lines - 1)


def test_oversized_counts_def_to_last_line_and_names_methods_and_nested_functions(tmp_path):
    source = (_function("fits", 60) + "\n\n@staticmethod\n" + _function("too_long", 61)
              + "\n\nclass Model:\n" + _function("method", 62, indent="    ")
              + "\n\n" + "def outer():\n" + _function("inner", 61, indent="    ") + "    return inner\n")
    package = _package(tmp_path, {"a.py": source})
    assert check_sizes.function_sizes(source)["fits"] == 60
    assert check_sizes.oversized(package) == {"pkg/a.py:too_long": 61, "pkg/a.py:Model.method": 62,
                                              "pkg/a.py:outer": 63, "pkg/a.py:outer.inner": 61}


def test_oversized_counts_module_lines_and_skips_the_exercises(tmp_path):
    package = _package(tmp_path, {"big.py": "x = 1\n" * 501, "ok.py": "x = 1\n" * 500,
                                  "exercises/ch01.py": "x = 1\n" * 900, "sub/deep.py": "x = 1\n" * 501})
    assert check_sizes.oversized(package) == {"pkg/big.py": 501, "pkg/sub/deep.py": 501}


@pytest.mark.parametrize(("lines", "code"), [(60, 0), (61, 1)])
def test_main_exits_with_1_when_a_limit_is_broken(tmp_path, capsys, lines, code):
    package = _package(tmp_path, {"a.py": _function("f", lines)})
    assert check_sizes.main(["--package", str(package)]) == code
    out = capsys.readouterr().out
    assert ("61  pkg/a.py:f" in out) is (code == 1)
