"""The course as a book: what Sphinx (myst-nb, sphinx-book-theme) needs beyond book/conf.py.   make book

Two editions, built by two runs of ``sphinx-build -c book .`` from the notebooks as committed (their stored
outputs; nothing is executed): English at ``build/book/html/``, Chinese (``-t zh``) at ``build/book/html/zh/``.
The landing page of each is its README (with the course map), the notebooks follow in reading order, lessons
before the appendices. This module is a Sphinx extension (``setup``) that

- rewrites the README for the site (``source-read``): badge images from Colab's and Binder's servers become text
  links, links to files that are not pages go to the repository, links to the other edition go to its pages, and a
  hidden table of contents puts the notebooks in order;
- hides each notebook's set-up cell (it installs the course where it is missing: noise on a web page);
- gives every page its links (``html-page-context``): the same page in the other edition, and on a notebook's page
  its ``.ipynb`` (copied beside the page), Open in Colab and Binder (``scripts/write_badges.py``'s URLs);
- serves a CJK web font (``build-finished``; book/_static/course-cjk.css): the course's font
  (mlm_course/data/fonts/), subset to the characters of the edition's pages, as WOFF; and drops the MathJax
  bundles the pages do not load;
- makes search find number sequences such as "80/10/10" (:func:`search_languages`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # when Sphinx imports this module from book/conf.py

from sync_first_cell import ROOT, source_url  # noqa: E402
from write_badges import binder_url, colab_url, github_repo  # noqa: E402

OUT = ROOT / "build" / "book" / "html"

EDITIONS = {"en": {"root_doc": "README", "notebooks": "notebooks", "language": "en", "label": "English"},
            "zh": {"root_doc": "README.zh-CN", "notebooks": "notebooks/zh", "language": "zh_CN", "label": "中文"}}
OTHER = {"en": "zh", "zh": "en"}
SUBFOLDER = {"en": "", "zh": "zh/"}  # where each edition sits in the site
SETUP_CELL = "course-setup"  # the id of every notebook's first cell
CJK_FONT = ROOT / "mlm_course" / "data" / "fonts" / "CourseCJKSans-Regular.otf"
WEB_FONT = "_static/fonts/course-cjk-sans.woff"
FONT_FAMILY = "Course CJK Sans"
MATHJAX = "tex-chtml.js"  # the bundle sphinx-mathjax-offline points the pages at
# the characters the web font serves (book/_static/course-zh.css, unicode-range): CJK radicals to ideographs (with
# CJK punctuation, kana and bopomofo), compatibility ideographs, CJK compatibility forms, full-width forms
CJK_RANGES = ((0x2E80, 0x9FFF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF))
_BADGE = re.compile(r"\[!\[([^\]]*)\]\([^)]*\)\]\(([^)]*)\)")
_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)#\s]+)(#[^)\s]*)?\)")


def pages_url(repo: str) -> str:
    """Where GitHub Pages publishes the site of the repository ``OWNER/NAME`` (.github/workflows/pages.yml)."""
    owner, name = repo.split("/")
    return f"https://{owner.lower()}.github.io/{name}/"


def notebook_names(edition: str, root: Path = ROOT) -> list[str]:
    """The edition's notebooks (names without ``.ipynb``) in reading order: lessons, then appendices."""
    names = sorted(path.stem for path in (root / EDITIONS[edition]["notebooks"]).glob("[0-9][0-9]_*.ipynb"))
    return [name for name in names if "_appendix_" not in name] + [name for name in names if "_appendix_" in name]


def page_of(edition: str, docname: str) -> str | None:
    """The page of the other edition that shows the same thing as ``docname`` of ``edition`` (a docname)."""
    own, other = EDITIONS[edition], EDITIONS[OTHER[edition]]
    if docname == own["root_doc"]:
        return other["root_doc"]
    if docname in ("search", "genindex"):
        return docname
    folder, _, name = docname.rpartition("/")
    if folder == own["notebooks"] and re.fullmatch(r"\d\d_\w+", name):
        return f"{other['notebooks']}/{name}"
    return other["root_doc"] if docname.startswith(own["notebooks"]) else None


def relative_url(edition: str, docname: str, target_edition: str, target: str) -> str:
    """The link from page ``docname`` of ``edition`` to page ``target`` of ``target_edition`` (``.html``)."""
    depth = docname.count("/") + SUBFOLDER[edition].count("/")
    return "../" * depth + SUBFOLDER[target_edition] + target + ".html"


def page_links(edition: str, docname: str, repo: str) -> list[dict[str, str]]:
    """The links in a page's header: the other edition's page; on a notebook its .ipynb, Colab and Binder."""
    links = []
    other = page_of(edition, docname)
    if other is not None:
        links.append({"label": EDITIONS[OTHER[edition]]["label"], "kind": "edition",
                      "href": relative_url(edition, docname, OTHER[edition], other)})
    folder, _, name = docname.rpartition("/")
    if folder == EDITIONS[edition]["notebooks"] and re.fullmatch(r"\d\d_\w+", name):
        path = f"{docname}.ipynb"
        links += [{"label": ".ipynb", "kind": "download", "href": f"{name}.ipynb"},
                  {"label": "Open in Colab", "kind": "colab", "href": colab_url(repo, path)},
                  {"label": "Binder", "kind": "binder", "href": binder_url(repo, path)}]
    return links


def _site_link(edition: str, target: str, repo: str) -> str | None:
    """Where a README link to the repository file ``target`` goes on the site: a page of either edition (relative),
    or None for a page of this edition (Sphinx resolves it); any other file goes to the repository."""
    if target.startswith(("http://", "https://", "mailto:")):
        return target
    stem = target.removesuffix(".ipynb").removesuffix(".md")
    folder, _, page = stem.rpartition("/")
    for name, spec in EDITIONS.items():
        notebook = target.endswith(".ipynb") and re.fullmatch(r"\d\d_\w+", page)
        glossary = name == "zh" and target.endswith(".md") and page == "GLOSSARY"
        if stem == spec["root_doc"] or (folder == spec["notebooks"] and (notebook or glossary)):
            return None if name == edition else relative_url(edition, EDITIONS[edition]["root_doc"], name, stem)
    return f"https://github.com/{repo}/blob/main/{target}"


def readme_for_site(text: str, edition: str, repo: str) -> str:
    """The README of ``edition`` as the site's landing page (see the module's docstring)."""
    text = _BADGE.sub(lambda m: f"[{m[1]}]({m[2]})", text)

    def link(match: re.Match) -> str:
        href = _site_link(edition, match[2], repo)
        if href is None:
            return match[0]
        if href.startswith("http"):
            return f"[{match[1]}]({href}{match[3] or ''})"
        return f'<a href="{href}{match[3] or ""}">{match[1]}</a>'

    text = _LINK.sub(link, text)
    names = notebook_names(edition)
    folder = EDITIONS[edition]["notebooks"]
    lessons = [name for name in names if "_appendix_" not in name]
    captions = ("Lessons", "Appendices", "Glossary") if edition == "en" else ("课程", "附录", "术语表")
    toc = [(captions[0], lessons), (captions[1], [n for n in names if n not in lessons])]
    if edition == "zh":
        toc.append((captions[2], ["GLOSSARY"]))
    trees = "".join(f"\n\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n"
                    + "".join(f"{folder}/{name}\n" for name in pages) + "```\n" for caption, pages in toc if pages)
    return text + trees


def hide_setup_cell(notebook_json: str) -> str:
    """The notebook (JSON text) with its set-up cell tagged ``remove-cell`` (myst-nb leaves it off the page)."""
    notebook = json.loads(notebook_json)
    for cell in notebook["cells"]:
        if cell.get("id") == SETUP_CELL:
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if "remove-cell" not in tags:
                tags.append("remove-cell")
    return json.dumps(notebook, ensure_ascii=False)


def site_characters(folder: Path) -> str:
    """Every character in the text files (HTML, JavaScript, JSON) under ``folder``, sorted."""
    chars: set[str] = set()
    for path in folder.rglob("*"):
        if path.suffix in (".html", ".js", ".json", ".txt") and path.is_file() and "mathjax" not in path.parts:
            chars.update(path.read_text(encoding="utf-8", errors="ignore"))
    return "".join(sorted(chars))


def is_cjk(character: str) -> bool:
    """Whether the web font serves ``character`` (:data:`CJK_RANGES`)."""
    return any(lo <= ord(character) <= hi for lo, hi in CJK_RANGES)


def missing_cjk(characters: str, font: Path = CJK_FONT) -> str:
    """The CJK characters of ``characters`` that ``font`` has no glyph for."""
    from fontTools.ttLib import TTFont

    cmap = TTFont(str(font), lazy=True).getBestCmap()
    return "".join(c for c in characters if is_cjk(c) and ord(c) not in cmap)


def write_web_font(characters: str, out: Path, font: Path = CJK_FONT) -> int:
    """Write ``font`` subset to ``characters`` (those it has) as WOFF to ``out``; returns the glyphs kept."""
    import logging

    from fontTools import subset

    logging.getLogger("fontTools").setLevel(logging.WARNING)  # else every table it prunes is logged
    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]
    options.hinting = False
    options.name_IDs = ["*"]  # keeps the name table's licence and copyright records
    loaded = subset.load_font(str(font), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in characters if ord(c) > 0x7F or c.isprintable()])
    subsetter.subset(loaded)
    out.parent.mkdir(parents=True, exist_ok=True)
    subset.save_font(loaded, str(out), options)
    return len(loaded.getGlyphOrder())


def prune_mathjax(folder: Path, keep: str = MATHJAX) -> list[str]:
    """Remove the MathJax bundles the site does not load (sphinx-mathjax-offline copies all 14, 14 MB, among them
    ``latest.js``, which fetches MathJax from a CDN): only ``keep``, which loads its extensions, the menu, speech and
    the fonts from the folders beside it. Returns the names removed."""
    removed = sorted(path.name for path in folder.glob("*.js") if path.name != keep)
    for name in removed:
        (folder / name).unlink()
    return removed


def _source_read(app, docname: str, source: list[str]) -> None:
    edition = app.config.course_edition
    if docname == EDITIONS[edition]["root_doc"]:
        source[0] = readme_for_site(source[0], edition, github_repo(source_url()))
    elif app.env.doc2path(docname).suffix == ".ipynb":
        source[0] = hide_setup_cell(source[0])


def _page_context(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    context["course_links"] = page_links(app.config.course_edition, pagename, github_repo(source_url()))


def _build_finished(app, exception) -> None:
    """Copy each notebook beside its page, make the landing page index.html, write the web font."""
    if exception is not None or app.builder.format != "html":
        return
    edition, out = app.config.course_edition, Path(app.outdir)
    folder = EDITIONS[edition]["notebooks"]
    for name in notebook_names(edition):
        shutil.copyfile(ROOT / folder / f"{name}.ipynb", out / folder / f"{name}.ipynb")
    shutil.copyfile(out / f"{EDITIONS[edition]['root_doc']}.html", out / "index.html")
    prune_mathjax(out / "_static" / "mathjax")
    characters = site_characters(out)
    glyphs = write_web_font(characters, out / WEB_FONT)
    print(f"{edition}: {WEB_FONT}: {glyphs} glyphs, {(out / WEB_FONT).stat().st_size / 1e6:.2f} MB")
    missing = missing_cjk(characters)
    if missing:
        print(f"warning: the course's CJK font lacks {missing}, which the site shows as missing-glyph boxes where no "
              "font of the reader's has them: run scripts/build_cjk_font.py (it keeps every CJK character of the "
              "notebooks)", file=sys.stderr)


# Number sequences such as "80/10/10" or "80 / 10 / 10": Sphinx's search drops numbers (in the index and in the
# query), so the site's search indexes each sequence as one term, "80/10/10", and splits a query the same way.
_SEQUENCE = re.compile(r"\d+(?:\s*[/\-\u2013]\s*\d+)+")
JS_SPLITTER = r"""
var splitQuery = (query) => {
  const sequence = /\d+(?:\s*[\/\-\u2013]\s*\d+)+/g;
  const terms = (query.match(sequence) || []).map((t) => t.replace(/\s*[\/\-\u2013]\s*/g, "/"));
  return terms.concat(query.replace(sequence, " ").split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)
    .filter((term) => term));
};
"""


def sequence_terms(text: str) -> list[str]:
    """The number sequences of ``text`` as search terms: "80 / 10 / 10" and "80-10-10" give "80/10/10"."""
    return [re.sub(r"\s*[/\-\u2013]\s*", "/", found) for found in _SEQUENCE.findall(text)]


def search_languages() -> dict[str, type]:
    """Sphinx's English and Chinese search, each also indexing number sequences (:func:`sequence_terms`, and
    :data:`JS_SPLITTER` for the query); the Chinese one names the JavaScript stemmer it ships (Sphinx 9.0 ships the
    English one but names it ``ChineseStemmer``: a console error on every Chinese page and no search)."""
    from sphinx.search.en import SearchEnglish
    from sphinx.search.zh import SearchChinese

    class CourseEnglishSearch(SearchEnglish):
        js_splitter_code = JS_SPLITTER

        def split(self, input: str) -> list[str]:
            return super().split(input) + sequence_terms(input)

    class CourseChineseSearch(SearchChinese):
        js_splitter_code = JS_SPLITTER
        language_name = "English" if SearchChinese.js_stemmer_rawcode == "english-stemmer.js" else "Chinese"

        def split(self, input: str) -> list[str]:
            return super().split(input) + sequence_terms(input)

    return {"en": CourseEnglishSearch, "zh": CourseChineseSearch}


def setup(app):
    from sphinx.search import languages

    languages.update(search_languages())
    app.add_config_value("course_edition", "en", "env")
    app.connect("source-read", _source_read)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _build_finished, priority=900)  # after sphinx-mathjax-offline has copied MathJax
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def build(out: Path = OUT) -> float:
    """Build both editions into ``out`` (emptied first; Sphinx's caches go beside it): English at its root,
    Chinese in ``zh/``. A Sphinx warning (a broken link or reference, say) fails the build. Returns the seconds."""
    start = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    for edition in EDITIONS:
        tags = ["-t", edition] if edition != "en" else []
        command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-c", str(ROOT / "book"),
                   *tags, "-d", str(out.parent / "doctrees" / edition), str(ROOT), str(out / SUBFOLDER[edition])]
        if subprocess.run(command).returncode != 0:
            raise RuntimeError(f"the {edition} edition did not build (Sphinx's messages are above): {' '.join(command)}")
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/book_site.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?", default=OUT, help=f"the site's folder (default: {OUT})")
    args = parser.parse_args(argv)
    try:
        seconds = build(args.out.resolve())
    except RuntimeError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"the course as a book in {seconds:.0f} s: open {args.out / 'index.html'} (Chinese: {args.out / 'zh/index.html'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
