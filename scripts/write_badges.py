"""Write the "Open in Colab" and Binder links of the README's course map:   python scripts/write_badges.py

The links come from the one source URL in pyproject.toml (``[project.urls] Source``, a GitHub repository), one row
per notebook of ``notebooks/``; tests/test_first_cell.py checks the README is current. Binder builds its
environment from ``environment.yml``.
"""

from __future__ import annotations

import re
import sys
from urllib.parse import quote

from sync_first_cell import ROOT, source_url

BRANCH = "main"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"
COLUMN = "run it online"
_ROW = re.compile(r"^\| \[(\d\d_\w+)\]\(notebooks/\1\.ipynb\) \|")


def github_repo(url: str) -> str:
    """``OWNER/NAME`` of a GitHub URL (Colab and Binder open notebooks from GitHub)."""
    match = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", url)
    if match is None:
        raise ValueError(f"[project.urls] Source = {url!r} is not a GitHub repository (https://github.com/OWNER/NAME): "
                         "Colab and Binder links need one")
    return match.group(1)


def colab_url(repo: str, path: str) -> str:
    """Open in Colab: the notebook at ``path`` in the repository (e.g. "notebooks/01_why_log.ipynb")."""
    return f"https://colab.research.google.com/github/{repo}/blob/{BRANCH}/{path}"


def binder_url(repo: str, path: str) -> str:
    """Binder: JupyterLab on the repository, opened at the notebook ``path``."""
    return f"https://mybinder.org/v2/gh/{repo}/{BRANCH}?labpath={quote(path, safe='')}"


def badges(repo: str, notebook: str) -> str:
    """The course map's cell for ``notebook`` (e.g. "01_why_log"): Colab and Binder badges linking to it."""
    path = f"notebooks/{notebook}.ipynb"
    return f"[![Open in Colab]({COLAB_BADGE})]({colab_url(repo, path)}) [![Binder]({BINDER_BADGE})]({binder_url(repo, path)})"


def _without_badges(line: str) -> str:
    """A table line without its last cell when that cell is the badges column (or its header)."""
    head, _, last = line.rstrip().rstrip("|").rpartition(" | ")
    stripped = last.strip()
    if stripped.startswith("[![Open in Colab]") or stripped == COLUMN:
        return head + " |"
    return line.rstrip()


def rewrite_course_map(readme: str, notebooks: list[str], repo: str) -> str:
    """``readme`` with the course map's badge column written for ``notebooks`` (names without ``.ipynb``).
    ValueError when the map's rows and the notebooks differ."""
    lines = readme.split("\n")
    header = next((i for i, line in enumerate(lines) if line.startswith("| notebook | what you learn |")), None)
    if header is None:
        raise ValueError("README.md has no course map (a table starting `| notebook | what you learn |`)")
    rows = {}
    for i in range(header + 2, len(lines)):
        match = _ROW.match(lines[i])
        if match is None:
            break
        rows[match.group(1)] = i
    if sorted(rows) != sorted(notebooks):
        raise ValueError(f"the course map lists {sorted(rows)} but notebooks/ holds {sorted(notebooks)}: "
                         "give every notebook one row, in reading order")
    lines[header] = _without_badges(lines[header]) + f" {COLUMN} |"
    lines[header + 1] = "|" + "---|" * (lines[header].count(" | ") + 1)
    for name, i in rows.items():
        lines[i] = _without_badges(lines[i]) + f" {badges(repo, name)} |"
    return "\n".join(lines)


def main() -> int:
    notebooks = [path.stem for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    updated = rewrite_course_map(text, notebooks, github_repo(source_url()))
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
        print("README.md: course map links written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
