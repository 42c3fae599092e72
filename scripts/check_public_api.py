"""Every public function and class of ``mlm_course`` is used and tested.

    python scripts/check_public_api.py       # lists the names that are not, exit status 1 if any

Used: a notebook's code, a script, a benchmark or the package itself (another function or class, the CLI) refers to
it. Tested: a test refers to it, or to a function of the package that refers to it (transitively: ``fit`` tests
the loop it calls). Names are matched as words, which errs towards "used"; the exercises package is left out.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def definitions(package: Path) -> dict[tuple[Path, str], set[str]]:
    """Top-level functions and classes, private ones too: (file, name) → the names its body refers to."""
    found: dict[tuple[Path, str], set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        if "exercises" in path.parts:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                refs = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                refs |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                found[path, node.name] = refs - {node.name}
    return found


def words(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Za-z_]\w*\b", text))


def notebook_code(folder: Path) -> str:
    cells = (cell for nb in sorted(folder.glob("*.ipynb")) for cell in json.loads(nb.read_text())["cells"])
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def reached(start: set[str], defs: dict[tuple[Path, str], set[str]]) -> set[str]:
    """The names in ``start`` and of every definition reachable from them (a name stands for all its definitions)."""
    refs: dict[str, set[str]] = {}
    for (_, name), names in defs.items():
        refs.setdefault(name, set()).update(names)
    seen, todo = set(), [name for name in start if name in refs]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(ref for ref in refs[name] if ref in refs and ref not in seen)
    return seen


def problems(root: Path = ROOT) -> list[str]:
    """One line per public name that nothing uses, or that no test reaches."""
    defs = definitions(root / "mlm_course")
    texts = [notebook_code(root / "notebooks")]
    texts += [p.read_text() for folder in ("scripts", "benchmarks") for p in sorted((root / folder).glob("*.py"))]
    outside = set().union(*map(words, texts))
    module_level = set()  # names the package refers to outside its public definitions (aliases, __all__, tables)
    for path in (root / "mlm_course").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef):
                module_level |= words(ast.unparse(node))
    inside = set().union(*defs.values()) | module_level
    tested = reached(set().union(*(words(p.read_text()) for p in (root / "tests").rglob("*.py"))), defs)
    out = []
    for path, name in defs:
        if name.startswith("_"):
            continue
        where = path.relative_to(root)
        if name not in outside and name not in inside:
            out.append(f"{where}: {name} is used by no notebook, script, benchmark or module")
        if name not in tested:
            out.append(f"{where}: {name} is reached by no test")
    return out


if __name__ == "__main__":
    found = problems()
    print("\n".join(found) or "every public function and class is used and tested")
    sys.exit(1 if found else 0)
