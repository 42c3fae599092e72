"""Keep the Chinese edition in step with the English one:   python scripts/sync_translations.py

Every ``notebooks/zh/NN_*.ipynb`` has the cells of ``notebooks/NN_*.ipynb`` in the same order: its code cells are
the English ones — source, outputs and execution counts copied from the English edition on every run — and its
markdown cells are the translation, left as they are. Figures are the exception: ``scripts/execute_chinese.py``
runs the Chinese edition, whose figures are drawn in Chinese, and each Chinese figure records the English figure
it stands for (``translated_from`` in the output's metadata); it is kept while that English figure is unchanged,
and otherwise replaced by the English figure and named, until the Chinese edition is run again. Where the English notebook gained, lost or reordered cells,
the script names the first place the two differ and changes nothing: translate there, then run it again.
Exercise cells (``check("NN.k", ...)``, ``get("NN.k").prompt``) are the other exception: what they print is the
exercise's text in the notebook's language, so their outputs come from the Chinese run too, each recording the
English outputs it stands for (``translated_from`` in the cell's metadata), kept while those stand.
``--start NN_name`` begins a translation: a copy of the English notebook whose markdown cells are then translated.

Each translated markdown cell records which English text it translates (``metadata.translated_from``: a hash of
the English cell). Where the English cell has changed since, the script names the cell: translate it again, then
record it with ``--translated NN_name CELL_ID ...`` (no ids: every markdown cell of that notebook).

``tests/test_translations.py`` fails when the editions drift (cell count, cell order, code text and outputs) and
when a translation or a Chinese figure is older than its English cell or figure.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
from pathlib import Path

from sync_first_cell import dumps  # a sibling script: scripts/ is on the path when run or tested

ROOT = Path(__file__).resolve().parents[1]
CODE_FIELDS = ("source", "outputs", "execution_count", "metadata")
MARK = "translated_from"  # in a Chinese markdown cell's metadata: english_hash of the English cell it translates;
# in the metadata of a Chinese figure (an output): figure_hash of the English figure it was drawn for
FIGURE = "image/png"
WORDED = re.compile(r'\bcheck\("\d\d\.\d+"|\bget\("\d\d\.\d+"\)\.prompt')  # a cell that prints an exercise's words


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


def english_hash(cell: dict) -> str:
    """The first 16 hex digits of the SHA-256 of a cell's text."""
    return hashlib.sha256("".join(cell["source"]).encode("utf-8")).hexdigest()[:16]


def stale(english: dict, chinese: dict) -> list[str]:
    """Ids of the markdown cells whose English text is not the one their translation records (changed since, or
    never recorded)."""
    return [a["id"] for a, b in zip(english["cells"], chinese["cells"], strict=True)
            if a["cell_type"] == "markdown" and b.get("metadata", {}).get(MARK) != english_hash(a)]


def recorded(english: dict, chinese: dict, ids: list[str]) -> dict:
    """``chinese`` with the markdown cells named in ``ids`` (all where empty) recorded as translations of the English
    cells as they stand."""
    unknown = set(ids) - {cell["id"] for cell in english["cells"] if cell["cell_type"] == "markdown"}
    if unknown:
        raise ValueError(f"no markdown cell with id {', '.join(sorted(unknown))}: name the ids that stale cells print")
    cells = []
    for a, b in zip(english["cells"], chinese["cells"], strict=True):
        if a["cell_type"] == "markdown" and (not ids or a["id"] in ids):
            b = {**b, "metadata": {**b.get("metadata", {}), MARK: english_hash(a)}}
        cells.append(b)
    return {**chinese, "cells": cells}


def figure_hash(output: dict) -> str:
    """The first 16 hex digits of the SHA-256 of an output's PNG (as stored: base64)."""
    return hashlib.sha256(output["data"][FIGURE].encode("ascii")).hexdigest()[:16]


def figures(cell: dict) -> list[dict]:
    """The outputs of a code cell that show a figure (a PNG), in order."""
    return [output for output in cell.get("outputs", []) if FIGURE in output.get("data", {})]


def _with_figures(english_cell: dict, drawn: dict[str, str]) -> dict:
    """The English code cell, each figure replaced by ``drawn[its hash]`` (a Chinese PNG) where there is one,
    the output recording which English figure it was drawn for."""
    cell = copy.deepcopy(english_cell)
    for output in figures(cell):
        key = figure_hash(output)
        if key in drawn:
            output["data"][FIGURE] = drawn[key]
            output["metadata"] = {**output.get("metadata", {}), MARK: key}
    return cell


def worded(cell: dict) -> bool:
    """Whether a code cell prints an exercise's prompt or verdict, which the course words in the notebook's language."""
    return cell["cell_type"] == "code" and bool(WORDED.search("".join(cell["source"])))


def outputs_hash(cell: dict) -> str:
    """The first 16 hex digits of the SHA-256 of a code cell's outputs as stored."""
    return hashlib.sha256(json.dumps(cell.get("outputs", []), sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _with_words(english_cell: dict, printed: dict) -> dict:
    """The English exercise cell with the outputs of ``printed`` (the Chinese run's cell) in place of its own,
    recording which English outputs they stand for."""
    cell = copy.deepcopy(english_cell)
    cell["outputs"] = copy.deepcopy(printed.get("outputs", []))
    cell["metadata"] = {**cell.get("metadata", {}), MARK: outputs_hash(english_cell)}
    return cell


def synced(english: dict, chinese: dict) -> dict:
    """``chinese`` with every code cell replaced by the English one, except for the figures the Chinese edition
    drew in Chinese for exactly these English figures and the exercise cells it printed in Chinese for exactly
    these English outputs; markdown and notebook metadata kept."""
    cells = []
    for a, b in zip(english["cells"], chinese["cells"], strict=True):
        if a["cell_type"] != "code":
            cells.append(b)
        elif worded(a) and b.get("metadata", {}).get(MARK) == outputs_hash(a):
            cells.append(_with_words(a, b))
        else:
            drawn = {output["metadata"][MARK]: output["data"][FIGURE] for output in figures(b)
                     if MARK in output.get("metadata", {})}
            cells.append(_with_figures(a, drawn))
    return {**chinese, "cells": cells}


def with_chinese_figures(english: dict, chinese: dict, executed: dict) -> dict:
    """``chinese`` (synced) with the figures of ``executed``, a run of it in Chinese: the n-th figure of a cell
    stands for the English cell's n-th figure. Raises ValueError where the two runs drew different numbers."""
    cells = []
    for a, b, run in zip(english["cells"], chinese["cells"], executed["cells"], strict=True):
        if a["cell_type"] != "code":
            cells.append(b)
            continue
        theirs, ours = figures(a), figures(run)
        if len(theirs) != len(ours):
            raise ValueError(f"cell {a.get('id')}: the English run drew {len(theirs)} figures, the Chinese run "
                             f"{len(ours)}: execute both editions from the same code")
        if worded(a):
            cells.append(_with_words(a, run))
            continue
        cells.append(_with_figures(a, {figure_hash(en): zh["data"][FIGURE] for en, zh in zip(theirs, ours, strict=True)}))
    return {**chinese, "cells": cells}


def stale_figures(english: dict, chinese: dict) -> list[str]:
    """Ids of the code cells with an English figure that the Chinese edition has not drawn in Chinese."""
    return [a["id"] for a, b in zip(english["cells"], chinese["cells"], strict=True) if a["cell_type"] == "code"
            and {figure_hash(o) for o in figures(a)} - {o.get("metadata", {}).get(MARK) for o in figures(b)}]


def stale_words(english: dict, chinese: dict) -> list[str]:
    """Ids of the exercise cells whose outputs the Chinese edition has not printed in Chinese for the English ones."""
    return [a["id"] for a, b in zip(english["cells"], chinese["cells"], strict=True)
            if worded(a) and b.get("metadata", {}).get(MARK) != outputs_hash(a)]


def without_figures(cell: dict) -> dict:
    """A code cell's fields that both editions share: its figures blanked (the Chinese ones are drawn apart), and
    an exercise cell's outputs and their record left out (the Chinese ones are printed apart)."""
    if worded(cell):
        metadata = {key: value for key, value in cell.get("metadata", {}).items() if key != MARK}
        return {key: cell.get(key) for key in CODE_FIELDS if key != "outputs"} | {"metadata": metadata}
    cell = copy.deepcopy(cell)
    for output in figures(cell):
        output["data"][FIGURE] = ""
        output.get("metadata", {}).pop(MARK, None)
    return {key: cell.get(key) for key in CODE_FIELDS}


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", metavar="NN_name", help="begin translating notebooks/NN_name.ipynb")
    parser.add_argument("--translated", nargs="+", metavar=("NN_name", "CELL_ID"),
                        help="record that these markdown cells of notebooks/zh/NN_name.ipynb (no ids: all of them) "
                             "translate the English cells as they stand now")
    args = parser.parse_args(argv)
    if args.translated:
        return record(root, args.translated[0], args.translated[1:])
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
        updated = synced(english, chinese)
        text = dumps(updated)
        if text != zh_path.read_text(encoding="utf-8"):
            zh_path.write_text(text, encoding="utf-8")
            print(f"updated {zh_path.relative_to(root)}")
        figures_old = stale_figures(english, updated) + stale_words(english, updated)
        if figures_old:
            print(f"{zh_path.relative_to(root)}: the figures or exercise text of code cells {' '.join(figures_old)} are "
                  f"the English ones (not run in Chinese since they changed): run  python scripts/execute_chinese.py "
                  f"{zh_path.stem}",
                  file=sys.stderr)
            status = 1
        old = stale(english, chinese)
        if old:
            print(f"{zh_path.relative_to(root)}: the English of markdown cells {' '.join(old)} changed since they were "
                  f"translated: translate them, then run  --translated {zh_path.stem} {' '.join(old)}", file=sys.stderr)
            status = 1
    return status


def record(root: Path, name: str, ids: list[str]) -> int:
    """``--translated``: write the record of :func:`recorded` into notebooks/zh/``name``.ipynb."""
    en_path, zh_path = root / "notebooks" / f"{name}.ipynb", root / "notebooks" / "zh" / f"{name}.ipynb"
    if not (en_path.exists() and zh_path.exists()):
        print(f"no {zh_path.relative_to(root)} with its English {en_path.relative_to(root)}: nothing recorded")
        return 2
    english, chinese = (json.loads(p.read_text(encoding="utf-8")) for p in (en_path, zh_path))
    problem = drift(english, chinese)
    if problem is not None:
        print(f"{zh_path.relative_to(root)}: {problem}; translate there first: nothing recorded", file=sys.stderr)
        return 1
    try:
        text = dumps(recorded(english, chinese, ids))
    except ValueError as error:
        print(f"{zh_path.relative_to(root)}: {error}; nothing recorded", file=sys.stderr)
        return 2
    zh_path.write_text(text, encoding="utf-8")
    print(f"recorded {', '.join(ids) if ids else 'every markdown cell'} as translated in {zh_path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
