"""The package's two parts: the lessons never import the machinery (mlm_course/lab), nor do the notebooks outside
their set-up cell and the cells marked as machinery; every training command's options are exactly its configuration
dataclass's fields, under the same names; and each lesson fits its word cap."""

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlm_course.lab import cli
from mlm_course.lab.finetune_run import FinetuneConfig
from mlm_course.lab.pretrain_run import PretrainConfig

PACKAGE = Path(__file__).resolve().parents[1] / "mlm_course"
NOTEBOOKS = PACKAGE.parent / "notebooks"  # the Chinese edition's code cells are these (tests/test_translations.py)
MACHINERY_MARK = "# Machinery cell (mlm_course.lab"
sys.path.insert(0, str(PACKAGE.parent / "scripts"))
import lesson_time  # noqa: E402


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
    """Every module of the package outside lab/, its root __init__ included."""
    return sorted(path for path in PACKAGE.rglob("*.py") if "lab" not in path.relative_to(PACKAGE).parts)


def is_machinery(module: str) -> bool:
    """``mlm_course.lab`` or a module inside it (not ``mlm_course.label_efficiency``, a lesson)."""
    return module == "mlm_course.lab" or module.startswith("mlm_course.lab.")


def module_name(path: Path) -> str:
    """``mlm_course/finetune/loop.py`` → ``mlm_course.finetune.loop``; a package's ``__init__`` is the package."""
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def test_the_checker_sees_imports_of_every_form(tmp_path):
    module = tmp_path / "mlm_course" / "finetune" / "example.py"
    module.parent.mkdir(parents=True)
    module.write_text("import mlm_course.lab.seeds\nfrom ..lab import runner\n\n\ndef f():\n"
                      "    from mlm_course.lab.cli import main\n")
    found = {name for name in imported_modules(module, tmp_path / "mlm_course") if is_machinery(name)}
    assert found >= {"mlm_course.lab.seeds", "mlm_course.lab.runner", "mlm_course.lab.cli"}
    assert not is_machinery("mlm_course.label_efficiency") and is_machinery("mlm_course.lab")


@pytest.mark.parametrize("path", lesson_files(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_lessons_never_import_the_machinery(path):
    machinery = sorted(name for name in imported_modules(path) if is_machinery(name))
    assert machinery == [], f"{path.relative_to(PACKAGE)} imports {machinery}"


def cell_imports(source: str) -> set[str]:
    """The modules a notebook code cell imports (its IPython magics and shell lines left out)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def marked_as_machinery(source: str) -> bool:
    """Whether one of the comment lines that open the cell says it is machinery."""
    opening = []
    for line in source.splitlines():
        if not line.startswith("#"):
            break
        opening.append(line)
    return any(line.startswith(MACHINERY_MARK) for line in opening)


def test_the_notebook_checker_sees_imports_and_marks():
    assert cell_imports("%matplotlib inline\nfrom mlm_course.lab import gpu_finale\nimport mlm_course.lab.cli") >= {
        "mlm_course.lab", "mlm_course.lab.gpu_finale", "mlm_course.lab.cli"}
    assert marked_as_machinery("# NBVAL_IGNORE_OUTPUT\n# Machinery cell (mlm_course.lab, ...): the finale\nx = 1")
    assert not marked_as_machinery("x = 1\n# Machinery cell (mlm_course.lab): too late")


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_notebooks_import_only_lessons_outside_the_set_up_and_marked_cells(path):
    """A learner reads lessons: the machinery is imported only by the first cell (which installs the course where
    it is missing) and by cells that open with the machinery mark, where the notebook runs an experiment grid or
    the finale."""
    cells = ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
    offenders = {index: sorted(name for name in cell_imports(source) if is_machinery(name))
                 for index, source in enumerate(cells) if index > 0 and not marked_as_machinery(source)}
    assert {index: names for index, names in offenders.items() if names} == {}


IMPORT_EACH_LESSON = """
import importlib, json, sys
loaded = {}
for name in sys.argv[1:]:
    importlib.import_module(name)
    loaded[name] = sorted(m for m in sys.modules if m == "mlm_course.lab" or m.startswith("mlm_course.lab."))
print(json.dumps(loaded))
"""


def test_importing_the_lessons_loads_no_machinery():
    """What runs, not only what the files say: in a fresh interpreter, importing every lesson (``mlm_course``,
    ``mlm_course.bert``, ...) one after another leaves no module of mlm_course.lab in sys.modules."""
    import json

    names = [module_name(path) for path in lesson_files()]
    assert {"mlm_course", "mlm_course.bert", "mlm_course.steps"} <= set(names)
    done = subprocess.run([sys.executable, "-c", IMPORT_EACH_LESSON, *names], capture_output=True, text=True,
                          check=True, cwd=PACKAGE.parent)
    loaded = json.loads(done.stdout)
    assert list(loaded) == names
    assert {name: lab for name, lab in loaded.items() if lab} == {}


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


# ---- a lesson fits the time it promises ------------------------------------------------------------------------------

WORD_CAP = 3_000  # markdown words before a lesson's exercises (DESIGN.md: the rest of a record goes to an appendix)
LESSONS = sorted(path for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if "_appendix_" not in path.name)


def test_each_appendix_follows_its_lesson_and_the_lesson_links_to_it():
    """An appendix (NN_appendix_*) holds the full record of an experiment a lesson sums up: it names the lesson in its
    title and the lesson links to it (the figure and the headline stay in the lesson)."""
    appendices = sorted(NOTEBOOKS.glob("[0-9][0-9]_appendix_*.ipynb"))
    assert [path.name[:2] for path in appendices] == ["11", "12"]
    assert all(int(path.name[:2]) > int(lesson.name[:2]) for path in appendices for lesson in LESSONS)
    for path in appendices:
        title = "".join(json.loads(path.read_text())["cells"][1]["source"]).splitlines()[0]
        lesson = next(p for p in LESSONS if title.startswith(f"# {path.name[:2]} · Appendix to {p.name[:2]}:"))
        lesson_text = "".join("".join(c["source"]) for c in json.loads(lesson.read_text())["cells"])
        assert f"]({path.name})" in lesson_text, f"{lesson.stem} does not link to {path.name}"


def test_words_are_counted_up_to_the_exercises_heading():
    cells = [{"cell_type": "markdown", "source": ["# Title\n", "two words"]},
             {"cell_type": "code", "source": ["four words of code"]},
             {"cell_type": "markdown", "source": ["three more words\n\n## 5 · Exercises\n", "never counted"]},
             {"cell_type": "markdown", "source": ["nor this"]}]
    # words are runs of letters and digits: "# Title" is one word, "80/10/10" would be three
    assert lesson_time.reading_words({"cells": cells}, kinds=("markdown",)) == 3 + 3
    assert lesson_time.reading_words({"cells": cells}) == 3 + 4 + 3


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_fits_its_word_cap(path):
    words = lesson_time.reading_words(json.loads(path.read_text()), kinds=("markdown",))
    assert words <= WORD_CAP, f"{path.stem}: {words:,} markdown words before its exercises (cap {WORD_CAP:,})"
