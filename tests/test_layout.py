"""The package's two parts: the lessons never import the machinery (mlm_course/lab), and every training command's
options are exactly its configuration dataclass's fields, under the same names."""

import ast
import dataclasses
from pathlib import Path

import pytest

from mlm_course.lab import cli
from mlm_course.lab.finetune_run import FinetuneConfig
from mlm_course.lab.pretrain_run import PretrainConfig

PACKAGE = Path(__file__).resolve().parents[1] / "mlm_course"


def imported_modules(path: Path, root: Path = PACKAGE) -> set[str]:
    """Every module ``path`` (a file of the package at ``root``) imports, at the top or inside a function, relative
    imports resolved."""
    package = ".".join(path.relative_to(root.parent).parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            base = ".".join(parts + ([node.module] if node.module else []))
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return names


def lesson_files() -> list[Path]:
    """Every module outside lab/ except the package's root __init__, which re-exports the quick/full settings."""
    return sorted(path for path in PACKAGE.rglob("*.py")
                  if "lab" not in path.relative_to(PACKAGE).parts and path != PACKAGE / "__init__.py")


def test_the_checker_sees_imports_of_every_form(tmp_path):
    module = tmp_path / "mlm_course" / "finetune" / "example.py"
    module.parent.mkdir(parents=True)
    module.write_text("import mlm_course.lab.seeds\nfrom ..lab import runner\n\n\ndef f():\n"
                      "    from mlm_course.lab.cli import main\n")
    found = {name for name in imported_modules(module, tmp_path / "mlm_course") if name.startswith("mlm_course.lab")}
    assert found >= {"mlm_course.lab.seeds", "mlm_course.lab.runner", "mlm_course.lab.cli"}


@pytest.mark.parametrize("path", lesson_files(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_lessons_never_import_the_machinery(path):
    machinery = sorted(name for name in imported_modules(path) if name.startswith("mlm_course.lab"))
    assert machinery == [], f"{path.relative_to(PACKAGE)} imports {machinery}"


@pytest.mark.parametrize(("command", "config_class", "extra"), [
    ("pretrain", PretrainConfig, {"--out", "--no-progress", "--resume"}),
    ("finetune", FinetuneConfig, {"--out", "--no-progress"}),
])
def test_every_option_is_a_field_of_the_commands_one_config(command, config_class, extra):
    parser = cli.build_parser()
    sub = next(action for action in parser._actions if action.dest == "command").choices[command]
    options = {string for action in sub._actions for string in action.option_strings if string.startswith("--")}
    fields = {"--" + field.name.replace("_", "-") for field in dataclasses.fields(config_class)}
    negated = {"--no-" + name[2:] for name in fields}  # --sparse-logits / --no-sparse-logits
    assert options - negated - {"--help"} == fields | extra
    assert all(action.dest == action.option_strings[0][2:].replace("-", "_") for action in sub._actions
               if action.option_strings and action.option_strings[0][2:] in {f[2:] for f in fields})
