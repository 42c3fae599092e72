"""Every markdown cell of both editions, and the READMEs, render as CommonMark (the parser JupyterLab and GitHub
build on) without a literal ``*`` left in the text: an emphasis that does not close, as ``**时间：**阅读`` does not
(the closing ``**`` follows punctuation and precedes a letter, so it is not right-flanking), shows its asterisks to
the reader. Code spans and code blocks are not text, so an asterisk there is fine."""

import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
PAGES = [ROOT / "README.md", ROOT / "README.zh-CN.md", ROOT / "notebooks" / "zh" / "GLOSSARY.md"]
COMMONMARK = MarkdownIt("commonmark")


def stray_asterisks(markdown: str) -> list[str]:
    """The rendered text runs that still hold a ``*``."""
    found, tokens = [], COMMONMARK.parse(markdown)
    while tokens:
        token = tokens.pop()
        if token.type == "text" and "*" in token.content:
            found.append(token.content)
        tokens.extend(token.children or [])
    return found


def test_the_check_sees_an_emphasis_that_does_not_close():
    assert stray_asterisks("**时间：**阅读 20 分钟") == ["**时间：**阅读 20 分钟"]
    assert stray_asterisks("**时间**：阅读 20 分钟, *not* here, `a ** b` nor here") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_every_markdown_cell_renders_without_stray_asterisks(path):
    cells = json.loads(path.read_text())["cells"]
    strays = {cell["id"]: stray_asterisks("".join(cell["source"])) for cell in cells if cell["cell_type"] == "markdown"}
    assert {cell: texts for cell, texts in strays.items() if texts} == {}


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_the_readmes_and_the_glossary_render_without_stray_asterisks(path):
    assert stray_asterisks(path.read_text()) == []
