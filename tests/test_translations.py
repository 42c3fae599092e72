"""The Chinese edition (notebooks/zh/) in step with the English one: every notebook translated, the same cells in
the same order (kinds and ids), identical code cells (scripts/sync_translations.py copies them, outputs and all),
translated markdown that records the English text it translates (none older than its English cell), and one Chinese
term per concept (notebooks/zh/GLOSSARY.md: never a term of its "不用" column, except quoted, as a mention)."""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import sync_translations  # noqa: E402

PAIRS = sync_translations.pairs()
CJK = re.compile(r"[\u4e00-\u9fff]")
QUOTED = re.compile(r"“[^”]*”|「[^」]*」|‘[^’]*’")  # a term in quotation marks is mentioned, not used


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _markdown(notebook: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown"]


def rejected_terms(glossary: Path = ROOT / "notebooks" / "zh" / "GLOSSARY.md") -> dict[str, str]:
    """Each alternative the glossary rejects (its third column) → the term chosen instead."""
    rejected = {}
    for line in glossary.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] != "English" and cells[2] and CJK.search(cells[1]):
            rejected.update({term.strip(): cells[1] for term in cells[2].split("、") if term.strip()})
    return rejected


def test_every_english_notebook_has_its_translation():
    english = {p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert {zh.name for _, zh in PAIRS} == english


@pytest.mark.parametrize("english, chinese", PAIRS, ids=[zh.stem for _, zh in PAIRS])
def test_the_editions_have_the_same_cells_and_identical_code(english, chinese):
    en, zh = _load(english), _load(chinese)
    assert sync_translations.drift(en, zh) is None
    for a, b in zip(en["cells"], zh["cells"], strict=True):
        if a["cell_type"] == "code":
            assert {k: a.get(k) for k in sync_translations.CODE_FIELDS} == \
                   {k: b.get(k) for k in sync_translations.CODE_FIELDS}, "run scripts/sync_translations.py"


@pytest.mark.parametrize("english, chinese", PAIRS, ids=[zh.stem for _, zh in PAIRS])
def test_every_translation_records_the_english_text_it_translates(english, chinese):
    old = sync_translations.stale(_load(english), _load(chinese))
    assert not old, f"English changed since translated: {old}: translate, then sync_translations.py --translated"


@pytest.mark.parametrize("english, chinese", PAIRS, ids=[zh.stem for _, zh in PAIRS])
def test_the_markdown_is_translated_with_the_glossarys_terms(english, chinese):
    rejected = rejected_terms()
    for text in _markdown(_load(chinese)):
        if len(re.findall(r"[A-Za-z]", re.sub(r"`[^`]*`|\$[^$]*\$|\([^)]*\)|https?://\S+", "", text))) > 40:
            assert CJK.search(text), f"an untranslated markdown cell: {text[:80]!r}"
        used = [term for term in rejected if term in QUOTED.sub("", text)]
        assert not used, f"{used}: the glossary uses {[rejected[t] for t in used]} instead ({text[:60]!r})"


def test_the_glossary_rejects_what_it_says_and_chooses_one_term_for_token():
    rejected = rejected_terms()
    assert rejected["标记"] == rejected["令牌"] == "词元"
    assert rejected["遮蔽语言模型"] == "掩码语言模型" and rejected["整词掩码"] == "全词掩码"
    assert rejected["补齐"] == "填充" and "不用" not in rejected  # the header row is no term


def test_the_sync_script_copies_code_and_outputs_and_keeps_the_translation(tmp_path):
    english = {"cells": [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["Hello"]},
                         {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": 3, "source": ["x = 2"],
                          "outputs": [{"output_type": "stream", "name": "stdout", "text": ["2\n"]}]}],
               "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    chinese = json.loads(json.dumps(english))
    chinese["cells"][0].update(source=["你好"], metadata={"translated_from": sync_translations.english_hash(english["cells"][0])})
    chinese["cells"][1].update(source=["x = 1"], outputs=[], execution_count=None)
    folder = tmp_path / "notebooks"
    (folder / "zh").mkdir(parents=True)
    (folder / "01_x.ipynb").write_text(json.dumps(english))
    (folder / "zh" / "01_x.ipynb").write_text(json.dumps(chinese))
    assert sync_translations.main([], root=tmp_path) == 0
    synced = _load(folder / "zh" / "01_x.ipynb")
    assert synced["cells"][0]["source"] == ["你好"] and synced["cells"][1] == english["cells"][1]
    english["cells"].insert(1, {"cell_type": "markdown", "id": "new", "metadata": {}, "source": ["More"]})
    (folder / "01_x.ipynb").write_text(json.dumps(english))
    before = (folder / "zh" / "01_x.ipynb").read_text()
    assert sync_translations.main([], root=tmp_path) == 1  # drift: named, nothing changed
    assert (folder / "zh" / "01_x.ipynb").read_text() == before


def test_a_changed_english_cell_is_named_until_its_translation_is_recorded_again(tmp_path, capsys):
    cell = {"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["Hello"]}
    english = {"cells": [cell, {**cell, "id": "n", "source": ["World"]}], "metadata": {}, "nbformat": 4,
               "nbformat_minor": 5}
    chinese = json.loads(json.dumps(english))
    chinese["cells"][0]["source"], chinese["cells"][1]["source"] = ["你好"], ["世界"]
    folder = tmp_path / "notebooks"
    (folder / "zh").mkdir(parents=True)
    (folder / "01_x.ipynb").write_text(json.dumps(english))
    (folder / "zh" / "01_x.ipynb").write_text(json.dumps(chinese))
    assert sync_translations.stale(english, chinese) == ["m", "n"]  # never recorded
    assert sync_translations.main(["--translated", "01_x"], root=tmp_path) == 0
    assert sync_translations.main([], root=tmp_path) == 0
    english["cells"][1]["source"] = ["World!"]
    (folder / "01_x.ipynb").write_text(json.dumps(english))
    assert sync_translations.main([], root=tmp_path) == 1
    assert "markdown cells n changed" in capsys.readouterr().err
    before = (folder / "zh" / "01_x.ipynb").read_text()
    assert sync_translations.main(["--translated", "01_x", "nope"], root=tmp_path) == 2  # refused, nothing written
    assert (folder / "zh" / "01_x.ipynb").read_text() == before
    assert sync_translations.main(["--translated", "01_x", "n"], root=tmp_path) == 0
    recorded = _load(folder / "zh" / "01_x.ipynb")
    assert sync_translations.stale(english, recorded) == [] and recorded["cells"][1]["source"] == ["世界"]
