"""House limits: no module of mlm_course (the exercises package aside), benchmarks/ or scripts/ over 500 lines, no
function over 60 (scripts/check_sizes.py). No exceptions: split what grows past them."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import check_sizes  # noqa: E402


def test_no_module_is_over_500_lines_and_no_function_over_60():
    assert [folder.name for folder in check_sizes.FOLDERS] == ["mlm_course", "benchmarks", "scripts"]
    found = check_sizes.oversized()
    assert not found, f"over the limits (500 lines a module, 60 a function): {found}; split them, one idea per module"


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
    assert check_sizes.oversized([package]) == {"pkg/a.py:too_long": 61, "pkg/a.py:Model.method": 62,
                                                "pkg/a.py:outer": 63, "pkg/a.py:outer.inner": 61}


def test_oversized_counts_module_lines_and_skips_the_exercises(tmp_path):
    package = _package(tmp_path, {"big.py": "x = 1\n" * 501, "ok.py": "x = 1\n" * 500,
                                  "exercises/ch01.py": "x = 1\n" * 900, "sub/deep.py": "x = 1\n" * 501})
    assert check_sizes.oversized([package]) == {"pkg/big.py": 501, "pkg/sub/deep.py": 501}


def test_every_folder_is_checked_and_named_by_its_own_name(tmp_path):
    """Benchmarks and scripts hold functions too: each folder's long functions are found, named from the folder."""
    scripts = _package(tmp_path, {"one_off.py": _function("main", 61)}).rename(tmp_path / "scripts")
    benchmarks = _package(tmp_path, {"bench_x.py": _function("main", 60) + "\n\n" + _function("report", 95)})
    assert check_sizes.oversized([benchmarks, scripts]) == {"pkg/bench_x.py:report": 95, "scripts/one_off.py:main": 61}


@pytest.mark.parametrize(("lines", "code"), [(60, 0), (61, 1)])
def test_main_exits_with_1_when_a_limit_is_broken(tmp_path, capsys, lines, code):
    package = _package(tmp_path, {"a.py": _function("f", lines)})
    assert check_sizes.main(["--folder", str(package)]) == code
    out = capsys.readouterr().out
    assert ("61  pkg/a.py:f" in out) is (code == 1)
