"""Line counts of the modules of mlm_course, benchmarks/ and scripts/, and every function or method longer than the
house limit.

    python scripts/check_sizes.py                 # limits: 500 lines a module, 60 a function
    python scripts/check_sizes.py --max-function 40

A function's size is ``end_lineno - lineno + 1`` of its ``def`` (decorators not counted, nested functions
counted in their parent too and on their own). ``mlm_course/exercises`` (exercise data) is left out. Exits with
1 when a limit is broken. ``tests/test_sizes.py`` asserts that :func:`oversized` finds nothing.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "mlm_course", ROOT / "benchmarks", ROOT / "scripts")
EXCLUDED = ("exercises",)
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def module_files(folder: Path) -> list[Path]:
    """The ``.py`` files under ``folder``, the excluded subfolders left out, sorted."""
    return sorted(p for p in folder.rglob("*.py") if not set(p.relative_to(folder).parts[:-1]) & set(EXCLUDED))


def function_sizes(source: str) -> dict[str, int]:
    """Lines of every function and method in ``source``, by qualified name (``Class.method``, ``outer.inner``)."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                sizes[prefix + child.name] = child.end_lineno - child.lineno + 1
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def oversized(folders: Sequence[Path] = FOLDERS, max_module_lines: int = MAX_MODULE_LINES,
              max_function_lines: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """What breaks a limit in ``folders``, with its size: ``"mlm_course/x.py"`` (a module) or
    ``"mlm_course/x.py:f"`` (a function)."""
    found = {}
    for folder in folders:
        for path in module_files(folder):
            source = path.read_text(encoding="utf-8")
            name = path.relative_to(folder.parent).as_posix()
            if len(source.splitlines()) > max_module_lines:
                found[name] = len(source.splitlines())
            for function, lines in function_sizes(source).items():
                if lines > max_function_lines:
                    found[f"{name}:{function}"] = lines
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, action="append", default=None,
                        help="a folder to check, repeatable (default: mlm_course, benchmarks and scripts)")
    parser.add_argument("--max-module", type=int, default=MAX_MODULE_LINES, help="lines a module may have")
    parser.add_argument("--max-function", type=int, default=MAX_FUNCTION_LINES, help="lines a function may have")
    args = parser.parse_args(argv)
    folders = args.folder or list(FOLDERS)
    for folder in folders:
        for path in module_files(folder):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            flag = "  > limit" if lines > args.max_module else ""
            print(f"{lines:5d}  {path.relative_to(folder.parent).as_posix()}{flag}")
    too_long = oversized(folders, args.max_module, args.max_function)
    functions = {name: lines for name, lines in too_long.items() if ":" in name}
    print(f"\nfunctions over {args.max_function} lines: {len(functions) or 'none'}")
    for name, lines in sorted(functions.items(), key=lambda item: -item[1]):
        print(f"{lines:5d}  {name}")
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())
