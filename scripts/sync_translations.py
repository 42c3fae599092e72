"""Keep the Chinese edition in step with the English one:   python scripts/sync_translations.py

Every ``notebooks/zh/NN_*.ipynb`` has the cells of ``notebooks/NN_*.ipynb`` in the same order: its code cells are
the English ones — source, outputs and execution counts copied from the English edition on every run — and its
markdown cells are the translation, left as they are. Where the English notebook gained, lost or reordered cells,
the script names the first place the two differ and changes nothing: translate there, then run it again.
``--start NN_name`` begins a translation: a copy of the English notebook whose markdown cells are then translated.

``tests/test_translations.py`` fails when the editions drift (cell count, cell order, code text).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sync_first_cell import dumps  # a sibling script: scripts/ is on the path when run or tested

ROOT = Path(__file__).resolve().parents[1]
CODE_FIELDS = ("source", "outputs", "execution_count", "metadata")


def pairs(root: Path = ROOT) -> list[tuple[Path, Path]]:
    """(English, Chinese) notebook paths for every translated notebook."""
    return [(root / "notebooks" / zh.name, zh) for zh in sorted((root / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))]


def drift(english: dict, chinese: dict) -> str | None:
    """Where the two editions stop matching cell for cell (type and id), or None."""
    en, zh = english["cells"], chinese["cells"]
    for index, (a, b) in enumerate(zip(en, zh, strict=False)):
        if (a["cell_type"], a.get("id")) != (b["cell_type"], b.get("id")):
            return (f"cell {index}: the English edition has a {a['cell_type']} cell (id {a.get('id')}) where the "
                    f"translation has a {b['cell_type']} cell (id {b.get('id')})")
    if len(en) != len(zh):
        return f"the English edition has {len(en)} cells, the translation {len(zh)}"
    return None


def synced(english: dict, chinese: dict) -> dict:
    """``chinese`` with every code cell replaced by the English one; markdown and notebook metadata kept."""
    cells = [dict(a) if a["cell_type"] == "code" else b for a, b in zip(english["cells"], chinese["cells"], strict=True)]
    return {**chinese, "cells": cells}


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", metavar="NN_name", help="begin translating notebooks/NN_name.ipynb")
    args = parser.parse_args(argv)
    if args.start:
        source, target = root / "notebooks" / f"{args.start}.ipynb", root / "notebooks" / "zh" / f"{args.start}.ipynb"
        if not source.exists() or target.exists():
            print(f"{'no ' + str(source) if not source.exists() else str(target) + ' exists already'}: nothing done")
            return 2
        target.parent.mkdir(exist_ok=True)
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        print(f"started {target.relative_to(root)}: translate its markdown cells")
        return 0
    status = 0
    for en_path, zh_path in pairs(root):
        english, chinese = (json.loads(p.read_text(encoding="utf-8")) for p in (en_path, zh_path))
        problem = drift(english, chinese)
        if problem is not None:
            print(f"{zh_path.relative_to(root)}: {problem}; translate there, then run this again", file=sys.stderr)
            status = 1
            continue
        text = dumps(synced(english, chinese))
        if text != zh_path.read_text(encoding="utf-8"):
            zh_path.write_text(text, encoding="utf-8")
            print(f"updated {zh_path.relative_to(root)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
