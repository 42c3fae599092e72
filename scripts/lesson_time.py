"""How long each notebook takes a learner, for the README's course map: reading its text and code before the exercises
at 200 words a minute, waiting for its cells as the stored full-mode execution did, and 5 minutes per exercise.

    python scripts/lesson_time.py          # the table, notebook by notebook
    python scripts/lesson_time.py --write  # and the time column of README.md and README.zh-CN.md

``tests/test_where_learners_are.py`` checks the README's "time" column against :func:`minutes`, rounded up to 5.
"""

from __future__ import annotations

import json
import math
import re
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 200
MINUTES_PER_EXERCISE = 5
EXERCISES_HEADING = re.compile(r"^#+ .*Exercises", re.MULTILINE)
WORD = re.compile(r"\w+")  # a word: "80/10/10" is three, "3e-3" two, as a reader counts figures
CHECK_CALL = re.compile(r"""check\(\s*["'](\d\d\.\d+)["']""")


def reading_words(notebook: dict, kinds: tuple[str, ...] = ("markdown", "code")) -> int:
    """Words of the cells of ``kinds`` before the heading of the exercises (all of them if there is none)."""
    words = 0
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        heading = EXERCISES_HEADING.search(text) if cell["cell_type"] == "markdown" else None
        if cell["cell_type"] in kinds:
            words += len(WORD.findall(text[: heading.start() if heading else len(text)]))
        if heading:
            break
    return words


def run_seconds(notebook: dict) -> float:
    """Seconds the stored execution spent in the code cells (nbclient's timestamps in each cell's metadata)."""
    total = 0.0
    for cell in notebook["cells"]:
        stamps = cell.get("metadata", {}).get("execution", {})
        if "iopub.status.busy" in stamps and "iopub.status.idle" in stamps:
            start, end = (datetime.fromisoformat(stamps[key].replace("Z", "+00:00"))
                          for key in ("iopub.status.busy", "iopub.status.idle"))
            total += (end - start).total_seconds()
    return total


def exercises(notebook: dict) -> int:
    """The exercises the notebook checks (distinct ids passed to ``check``)."""
    return len({match for cell in notebook["cells"] if cell["cell_type"] == "code"
                for match in CHECK_CALL.findall("".join(cell["source"]))})


def minutes(path: Path) -> dict:
    """Reading, running and exercise minutes of one notebook, and their sum rounded up to 5."""
    notebook = json.loads(Path(path).read_text())
    parts = {"reading": reading_words(notebook) / WORDS_PER_MINUTE, "running": run_seconds(notebook) / 60,
             "exercises": exercises(notebook) * MINUTES_PER_EXERCISE}
    return {**{key: round(value, 1) for key, value in parts.items()},
            "total": 5 * math.ceil(sum(parts.values()) / 5)}


CELL_BORDER = re.compile(r"(?<!\\)\|")  # a table cell's border, not an escaped pipe inside it
READMES = {"README.md": ("notebooks/{}.ipynb", "{} min"), "README.zh-CN.md": ("notebooks/zh/{}.ipynb", "{} 分钟")}


def with_times(readme: str, link: str, unit: str, totals: dict[str, int | str]) -> str:
    """``readme`` with the time column (the fourth) of each notebook's course-map row set to its total."""
    lines = readme.splitlines(keepends=True)
    for index, line in enumerate(lines):
        name = next((n for n in totals if line.startswith("| [") and f"({link.format(n)})" in line), None)
        if name is not None:
            cells = CELL_BORDER.split(line)
            cells[4] = f" {unit.format(totals[name]) if totals[name] != '—' else '—'} "
            lines[index] = "|".join(cells)
    return "".join(lines)


def main(argv: list[str]) -> None:
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    totals: dict[str, int | str] = {}
    for path in paths:
        parts = minutes(path)
        totals[path.stem] = "—" if path.stem == "09_solutions" else parts["total"]  # the answer key: no time
        print(f"{path.stem:<20} {parts['total']:>4} min  (reading {parts['reading']:.0f}, running {parts['running']:.0f}, "
              f"exercises {parts['exercises']:.0f})")
    if "--write" in argv:
        for name, (link, unit) in READMES.items():
            path = ROOT / name
            path.write_text(with_times(path.read_text(), link, unit, totals))


if __name__ == "__main__":
    main(sys.argv[1:])
