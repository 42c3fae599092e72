"""scripts/book_site.py's pieces, without building the site (tests/test_book.py builds it and opens it)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import book_site  # noqa: E402
import write_badges  # noqa: E402

REPO = "mlm-course/mlm_course"


def test_colab_and_binder_urls_are_the_readme_badges_links():
    path = "notebooks/zh/03_masking.ipynb"
    assert write_badges.colab_url(REPO, path) == (
        "https://colab.research.google.com/github/mlm-course/mlm_course/blob/main/notebooks/zh/03_masking.ipynb")
    assert write_badges.binder_url(REPO, path) == (
        "https://mybinder.org/v2/gh/mlm-course/mlm_course/main?labpath=notebooks%2Fzh%2F03_masking.ipynb")
    cell = write_badges.badges(REPO, "03_masking")
    assert write_badges.colab_url(REPO, "notebooks/03_masking.ipynb") in cell
    assert write_badges.binder_url(REPO, "notebooks/03_masking.ipynb") in cell


def test_notebooks_in_reading_order_lessons_before_appendices(tmp_path):
    for name in ("11_appendix_b", "02_b", "01_a", "10_c", "03_appendix_x"):
        (tmp_path / "notebooks").mkdir(exist_ok=True)
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text("{}")
    assert book_site.notebook_names("en", tmp_path) == ["01_a", "02_b", "10_c", "03_appendix_x", "11_appendix_b"]
    assert book_site.notebook_names("en")[-2:] == ["11_appendix_pretraining_payoff", "12_appendix_lunch_break"]


@pytest.mark.parametrize(("edition", "docname", "other"), [
    ("en", "README", "README.zh-CN"), ("zh", "README.zh-CN", "README"),
    ("en", "notebooks/03_masking", "notebooks/zh/03_masking"), ("zh", "notebooks/zh/03_masking", "notebooks/03_masking"),
    ("en", "search", "search"), ("zh", "notebooks/zh/GLOSSARY", "README"), ("en", "something", None)])
def test_page_of_the_other_edition(edition, docname, other):
    assert book_site.page_of(edition, docname) == other


def test_relative_urls_between_editions():
    assert book_site.relative_url("en", "notebooks/03_masking", "zh", "notebooks/zh/03_masking") == \
        "../zh/notebooks/zh/03_masking.html"
    assert book_site.relative_url("zh", "notebooks/zh/03_masking", "en", "notebooks/03_masking") == \
        "../../../notebooks/03_masking.html"
    assert book_site.relative_url("zh", "README.zh-CN", "en", "README") == "../README.html"
    assert book_site.relative_url("en", "README", "zh", "README.zh-CN") == "zh/README.zh-CN.html"


def test_page_links_of_a_notebook_and_of_the_landing_page():
    links = {link["kind"]: link["href"] for link in book_site.page_links("zh", "notebooks/zh/05_objective", REPO)}
    assert links == {"edition": "../../../notebooks/05_objective.html", "download": "05_objective.ipynb",
                     "colab": write_badges.colab_url(REPO, "notebooks/zh/05_objective.ipynb"),
                     "binder": write_badges.binder_url(REPO, "notebooks/zh/05_objective.ipynb")}
    assert [link["kind"] for link in book_site.page_links("en", "README", REPO)] == ["edition"]


def test_readme_for_site_turns_badges_into_links_and_files_into_repository_links():
    readme = ("English · [中文](README.zh-CN.md), see [DATA.md](DATA.md) and [the map](#course-map)\n\n"
              "| [01_why_log](notebooks/01_why_log.ipynb) | [![Open in Colab](https://x/badge.svg)](https://colab/01) |\n")
    site = book_site.readme_for_site(readme, "en", REPO)
    assert '<a href="zh/README.zh-CN.html">中文</a>' in site
    assert f"[DATA.md](https://github.com/{REPO}/blob/main/DATA.md)" in site
    assert "[the map](#course-map)" in site and "[01_why_log](notebooks/01_why_log.ipynb)" in site
    assert "[Open in Colab](https://colab/01)" in site and "badge.svg" not in site
    lessons, appendices = site.split("```{toctree}")[1:]
    assert ":caption: Lessons" in lessons and "notebooks/01_why_log\n" in lessons
    assert "notebooks/12_appendix_lunch_break\n" in appendices and "01_why_log" not in appendices
    zh = book_site.readme_for_site("[01](notebooks/zh/01_why_log.ipynb)（[English](notebooks/01_why_log.ipynb)）"
                                   "[术语表](notebooks/zh/GLOSSARY.md)", "zh", REPO)
    assert "[01](notebooks/zh/01_why_log.ipynb)" in zh and '<a href="../notebooks/01_why_log.html">English</a>' in zh
    assert "[术语表](notebooks/zh/GLOSSARY.md)" in zh and ":caption: 术语表" in zh


def test_hide_setup_cell_tags_only_the_setup_cell():
    notebook = {"cells": [{"id": "course-setup", "cell_type": "code", "metadata": {}, "source": "", "outputs": []},
                          {"id": "x", "cell_type": "markdown", "metadata": {}, "source": "# 中文"}]}
    hidden = json.loads(book_site.hide_setup_cell(json.dumps(notebook)))
    assert hidden["cells"][0]["metadata"]["tags"] == ["remove-cell"]
    assert "tags" not in hidden["cells"][1]["metadata"] and hidden["cells"][1]["source"] == "# 中文"
    assert json.loads(book_site.hide_setup_cell(json.dumps(hidden))) == hidden


def test_sequence_terms_make_one_search_term_of_a_number_sequence():
    assert book_site.sequence_terms("the 80 / 10 / 10 rule, 80-10-10, 80/10/10 and 15 %") == ["80/10/10"] * 3
    assert book_site.sequence_terms("no numbers here, 15 %") == []


def test_search_languages_index_sequences_and_name_the_shipped_stemmer():
    languages = book_site.search_languages()
    english = languages["en"]({})
    assert "80/10/10" in english.split("Apply the 80 / 10 / 10 rule")
    assert english.word_filter(english.stem("80/10/10"))
    assert "var splitQuery" in english.js_splitter_code
    chinese = languages["zh"]({})
    assert "80/10/10" in chinese.split("应用 80 / 10 / 10 规则")
    assert chinese.js_stemmer_rawcode != "english-stemmer.js" or chinese.language_name == "English"


def test_site_characters_and_the_web_font_subset(tmp_path):
    (tmp_path / "a.html").write_text("<p>掩码 mask</p>", encoding="utf-8")
    (tmp_path / "b.js").write_text("const s = '搜索';", encoding="utf-8")
    (tmp_path / "c.png").write_bytes(b"\x89PNG")
    chars = book_site.site_characters(tmp_path)
    assert set("掩码搜索mask") <= set(chars) and chars == "".join(sorted(chars))
    from fontTools.ttLib import TTFont

    out = tmp_path / "font.woff"
    assert book_site.write_web_font(chars + "\U0001F600", out) > 4
    font = TTFont(out)
    assert font.flavor == "woff" and set(map(ord, "掩码搜索")) <= set(font.getBestCmap())
    assert 0x1F600 not in font.getBestCmap()
    assert any("Open Font License" in str(record) or "OFL" in str(record) for record in font["name"].names) \
        or any("Adobe" in str(record) for record in font["name"].names)


def test_the_font_css_serves_the_ranges_the_tests_check():
    css = (ROOT / "book" / "_static" / "course-cjk.css").read_text(encoding="utf-8")
    ranges = ", ".join(f"U+{lo:X}-{hi:X}" for lo, hi in book_site.CJK_RANGES)
    assert f"unicode-range: {ranges};" in css
    assert book_site.WEB_FONT.removeprefix("_static/") in css and f'"{book_site.FONT_FAMILY}"' in css


def test_main_reports_a_failed_build(monkeypatch, capsys, tmp_path):
    def fail(out):
        raise RuntimeError("the en edition did not build")

    monkeypatch.setattr(book_site, "build", fail)
    assert book_site.main([str(tmp_path)]) == 1
    assert "did not build" in capsys.readouterr().err
    monkeypatch.setattr(book_site, "build", lambda out: 12.0)
    assert book_site.main([str(tmp_path)]) == 0
    assert "index.html" in capsys.readouterr().out


def test_both_readmes_name_the_site_that_pages_publishes_for_the_source_repository():
    from sync_first_cell import source_url

    url = book_site.pages_url(write_badges.github_repo(source_url()))
    assert url == "https://mlm-course.github.io/mlm_course/"
    for readme in ("README.md", "README.zh-CN.md"):
        text = (ROOT / readme).read_text(encoding="utf-8")
        assert url in text and f"{url}zh/" in text and "make book" in text
    workflow = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert "make book" in workflow and "path: build/book/html" in workflow
    assert "actions/deploy-pages" in workflow and "pages: write" in workflow and "id-token: write" in workflow


def test_prune_mathjax_keeps_only_the_bundle_the_pages_load(tmp_path):
    for name in ("tex-chtml.js", "latest.js", "tex-svg.js"):
        (tmp_path / name).write_text("//")
    (tmp_path / "output").mkdir()
    assert book_site.prune_mathjax(tmp_path) == ["latest.js", "tex-svg.js"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["output", "tex-chtml.js"]


def test_is_cjk_and_missing_cjk():
    assert book_site.is_cjk("掩") and book_site.is_cjk("，") and not book_site.is_cjk("a") and not book_site.is_cjk("é")
    assert book_site.missing_cjk("掩码 mask，東") == ""  # the course's font keeps the notebooks' characters
    assert book_site.missing_cjk("\u4e02a") == "\u4e02"  # 丂: in no text of the course, nor in GB 2312
