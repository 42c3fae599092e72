"""Run the Chinese edition top to bottom in full mode, so that its figures are drawn in Chinese:

    .venv/bin/python scripts/execute_chinese.py                 # every notebooks/zh/NN_*.ipynb (≈ 30 min, 2 cores)
    .venv/bin/python scripts/execute_chinese.py 08_ablations    # only these

Run it after ``make execute`` (the English edition), from the same code. Each notebook is first synced
(``scripts/sync_translations.py``: code and outputs from the English edition), then executed in ``notebooks/zh/``
with ``MLM_COURSE_LANG=zh``. Of that run only the figures and the exercise cells' outputs are kept: each figure
replaces the English figure at the same place and records which English figure it stands for, each exercise cell's
outputs (its prompt, its verdict) the English ones; every other output stays the English one, so the numbers the
translated prose cites are the English edition's. Nothing is written when a figure names something the label
table lacks (``UntranslatedFigureText``), when a character is missing from the font, or when the Chinese run draws
a different number of figures in a cell. The script also reports in how many code cells the Chinese run printed
exactly what the English one did (a measure of how deterministic the notebooks are; it changes nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import sync_translations
from sync_first_cell import dumps

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg"}
PROBLEMS = ("UntranslatedFigureText", "missing from font")


def execute(notebook: dict, folder: Path, timeout: int) -> dict:
    """A copy of ``notebook`` run top to bottom by a kernel started in ``folder``, in Chinese and full mode."""
    import nbformat
    from nbclient import NotebookClient

    if os.environ.get("MLM_COURSE_QUICK", "0") not in ("", "0"):
        raise SystemExit("MLM_COURSE_QUICK is set: the Chinese figures are drawn from a full run; unset it")
    os.environ.update({**OFFLINE, "MLM_COURSE_LANG": "zh"})
    run = nbformat.reads(json.dumps(notebook), as_version=4)  # a NotebookNode, as nbclient expects
    NotebookClient(run, timeout=timeout, kernel_name=run.metadata.kernelspec.name,
                   resources={"metadata": {"path": str(folder)}}).execute()
    return json.loads(nbformat.writes(run))  # text split into lines again, as stored


def problems(run: dict) -> list[str]:
    """The warnings of the run that a Chinese figure is incomplete, with the id of the cell that printed each."""
    found = []
    for cell in run["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", "")) if output.get("output_type") == "stream" else ""
            found += [f"cell {cell.get('id')}: {line.strip()}" for line in text.splitlines()
                      if any(p in line for p in PROBLEMS)]
    return found


def same_prints(english: dict, run: dict) -> tuple[int, int]:
    """(code cells whose outputs other than figures equal the English ones, code cells)."""
    pairs = [(a, b) for a, b in zip(english["cells"], run["cells"], strict=True) if a["cell_type"] == "code"]
    same = sum(sync_translations.without_figures(a).get("outputs") == sync_translations.without_figures(b).get("outputs")
               for a, b in pairs)
    return same, len(pairs)


def run_one(name: str, timeout: int) -> int:
    en_path, zh_path = ROOT / "notebooks" / f"{name}.ipynb", ROOT / "notebooks" / "zh" / f"{name}.ipynb"
    english, chinese = (json.loads(p.read_text(encoding="utf-8")) for p in (en_path, zh_path))
    drift = sync_translations.drift(english, chinese)
    if drift is not None:
        print(f"{zh_path.relative_to(ROOT)}: {drift}; translate there first: nothing run", file=sys.stderr)
        return 1
    chinese = sync_translations.synced(english, chinese)
    run = execute(chinese, zh_path.parent, timeout)
    found = problems(run)
    if found:
        print(f"{zh_path.relative_to(ROOT)}: nothing written:\n  " + "\n  ".join(found), file=sys.stderr)
        return 1
    try:
        chinese = sync_translations.with_chinese_figures(english, chinese, run)
    except ValueError as error:
        print(f"{zh_path.relative_to(ROOT)}: {error}; nothing written", file=sys.stderr)
        return 1
    zh_path.write_text(dumps(chinese), encoding="utf-8")
    same, cells = same_prints(english, run)
    drawn = sum(len(sync_translations.figures(c)) for c in chinese["cells"])
    print(f"{zh_path.relative_to(ROOT)}: {drawn} figures drawn in Chinese; the run printed what the English one "
          f"did in {same} of {cells} code cells")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NN_name", help="notebooks to run (default: all)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds a cell may run (as make execute)")
    args = parser.parse_args(argv)
    names = args.names or [zh.stem for _, zh in sync_translations.pairs(ROOT)]
    unknown = [n for n in names if not (ROOT / "notebooks" / "zh" / f"{n}.ipynb").exists()]
    if unknown:
        print(f"no notebooks/zh/{unknown[0]}.ipynb: name a notebook as NN_name, e.g. 03_masking", file=sys.stderr)
        return 2
    return max(run_one(name, args.timeout) for name in names)


if __name__ == "__main__":
    sys.exit(main())
