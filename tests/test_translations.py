"""The Chinese edition (notebooks/zh/) in step with the English one: every notebook translated, the same cells in
the same order (kinds and ids), identical code cells (scripts/sync_translations.py copies them, outputs and all, but
for the figures, which scripts/execute_chinese.py draws in Chinese for the English figures as they stand), translated
markdown that records the English text it translates (none older than its English cell), and one Chinese term per
concept (notebooks/zh/GLOSSARY.md: never a term of its "不用" column, except quoted, as a mention)."""

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
            assert sync_translations.without_figures(a) == sync_translations.without_figures(b), \
                "run scripts/sync_translations.py"


@pytest.mark.parametrize("english, chinese", PAIRS, ids=[zh.stem for _, zh in PAIRS])
def test_every_figure_of_the_translation_is_drawn_in_chinese_for_the_english_figure_as_it_stands(english, chinese):
    en, zh = _load(english), _load(chinese)
    assert sync_translations.stale_figures(en, zh) == [], "run scripts/execute_chinese.py"
    for a, b in zip(en["cells"], zh["cells"], strict=True):  # a Chinese figure, not the English one recorded
        for theirs, ours in zip(sync_translations.figures(a), sync_translations.figures(b), strict=True):
            assert theirs["data"]["image/png"] != ours["data"]["image/png"]


@pytest.mark.parametrize("english, chinese", PAIRS, ids=[zh.stem for _, zh in PAIRS])
def test_every_exercise_cell_of_the_translation_prints_in_chinese_for_the_english_outputs_as_they_stand(english,
                                                                                                     chinese):
    en, zh = _load(english), _load(chinese)
    assert sync_translations.stale_words(en, zh) == [], "run scripts/execute_chinese.py"
    for a, b in zip(en["cells"], zh["cells"], strict=True):
        if sync_translations.worded(a) and a["outputs"]:
            assert CJK.search(json.dumps(b["outputs"], ensure_ascii=False)), f"cell {a['id']} prints no Chinese"


def test_an_exercise_cells_chinese_outputs_are_kept_while_its_english_outputs_stand():
    """Only cells that print an exercise's words count; their Chinese outputs stand for English outputs by hash."""
    def cell(source, text):
        return {"cell_type": "code", "id": "e", "metadata": {}, "execution_count": 1, "source": [source],
                "outputs": [{"output_type": "stream", "name": "stdout", "text": [text]}]}

    english = {"cells": [cell('check("03.6", answer)', "❌ 03.6: no\n")], "metadata": {}}
    run = {"cells": [cell('check("03.6", answer)', "❌ 03.6：不对\n")]}
    chinese = sync_translations.with_chinese_figures(english, english, run)
    assert chinese["cells"][0]["outputs"] == run["cells"][0]["outputs"]
    assert sync_translations.synced(english, chinese) == chinese and sync_translations.stale_words(english, chinese) == []
    assert sync_translations.without_figures(chinese["cells"][0]) == sync_translations.without_figures(english["cells"][0])
    english["cells"][0]["outputs"][0]["text"] = ["❌ 03.6: no, and here is why\n"]
    assert sync_translations.synced(english, chinese)["cells"][0] == english["cells"][0]  # the English until run again
    assert sync_translations.stale_words(english, chinese) == ["e"]
    assert not sync_translations.worded(cell("print(check)", "")) and sync_translations.worded(
        cell('print(get("07.5").prompt)', ""))
    assert sync_translations.worded(cell('check("07.10", answer)', ""))  # a tenth exercise is worded too


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


def _figure_cell(png: str) -> dict:
    return {"cell_type": "code", "id": "f", "metadata": {}, "execution_count": 1, "source": ["plots.mask_grid(...)"],
            "outputs": [{"output_type": "display_data", "metadata": {},
                         "data": {"image/png": png, "text/plain": ["<Figure size 640x480 with 1 Axes>"]}}]}


def test_a_chinese_figure_is_kept_while_its_english_figure_stands_and_replaced_when_it_changes(tmp_path, capsys):
    english = {"cells": [_figure_cell("RU4=")], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    executed = {**english, "cells": [_figure_cell("Wkg=")]}  # the Chinese run's figure
    chinese = sync_translations.with_chinese_figures(english, english, executed)
    output = chinese["cells"][0]["outputs"][0]
    assert output["data"]["image/png"] == "Wkg=" and output["metadata"]["translated_from"] == \
        sync_translations.figure_hash(english["cells"][0]["outputs"][0])
    assert sync_translations.stale_figures(english, chinese) == []
    assert sync_translations.synced(english, chinese) == chinese  # a sync keeps it
    assert sync_translations.without_figures(english["cells"][0]) == sync_translations.without_figures(
        chinese["cells"][0])
    folder = tmp_path / "notebooks"
    (folder / "zh").mkdir(parents=True)
    changed = {**english, "cells": [_figure_cell("TkVX")]}  # the English figure was drawn again, differently
    (folder / "01_x.ipynb").write_text(json.dumps(changed))
    (folder / "zh" / "01_x.ipynb").write_text(json.dumps(chinese))
    assert sync_translations.main([], root=tmp_path) == 1
    assert "execute_chinese.py 01_x" in capsys.readouterr().err
    assert _load(folder / "zh" / "01_x.ipynb")["cells"][0] == changed["cells"][0]  # the English figure, named
    with pytest.raises(ValueError, match="English run drew 1 figures, the Chinese run 0"):
        sync_translations.with_chinese_figures(english, english, {**english, "cells": [
            {**_figure_cell(""), "outputs": []}]})


def test_the_chinese_run_is_refused_while_a_figure_names_something_in_english_and_reports_what_it_printed():
    import execute_chinese

    warning = "/tmp/x.py:1: UntranslatedFigureText: mask_grid: no Chinese for ['seed 1'] in zh_labels.py\n"
    run = {"cells": [_figure_cell("Wkg="), {**_figure_cell("Wkg="), "id": "g", "outputs": [
        {"output_type": "stream", "name": "stderr", "text": ["plain\n", warning]}]}]}
    assert execute_chinese.problems(run) == ["cell g: " + warning.strip()]
    english = {"cells": [_figure_cell("RU4="), {**_figure_cell("RU4="), "id": "g"}]}
    assert execute_chinese.same_prints(english, run) == (1, 2)  # figures aside, cell f printed the same
