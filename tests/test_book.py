"""The course as a book (``make book``, scripts/book_site.py): the site is built once per test session from the
committed notebooks, its links are checked in Python, and headless Chromium opens it from a local HTTP server and
from disk: no console error, no broken image, math typeset, search, no missing CJK glyph, nothing from the network.

The build needs the ``book`` extra (part of ``test``); the browser checks need chromium and chromium-driver (as
tests/test_browser.py). Without them these tests are skipped, except in CI (``CI=true``), where they fail.
"""

import html
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_browser import _free_port, chromium_driver

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import book_site  # noqa: E402
import write_badges  # noqa: E402
from sync_first_cell import source_url  # noqa: E402

PAGE_LOAD_S = 30
# every character the web font serves (book_site.CJK_RANGES), as a JavaScript regular expression
CJK_JS = "[" + "".join(f"\\u{lo:04X}-\\u{hi:04X}" for lo, hi in book_site.CJK_RANGES) + "]"


def _missing(reason: str):
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason} (CI=true: not skipped)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The site, built once per session as ``make book`` builds it."""
    try:
        import myst_nb  # noqa: F401
        import sphinx_book_theme  # noqa: F401
    except ImportError:
        _missing("the book needs the `book` extra: pip install -e '.[book]'")
    out = tmp_path_factory.mktemp("book") / "html"
    book_site.build(out)
    return out


def _pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


class _Links(HTMLParser):
    """The ids of a page and the local targets of its links, images, scripts and style sheets."""

    def __init__(self):
        super().__init__()
        self.ids, self.targets, self.remote = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        url = attrs.get("href") if tag in ("a", "link") else attrs.get("src") if tag in ("img", "script") else None
        if url is None or url.startswith(("mailto:", "javascript:", "data:")):
            return
        if re.match(r"https?://", url):
            if tag != "a":  # a link away is fine; a script, style or image from the network is not
                self.remote.append(url)
            return
        self.targets.append(url)


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_local_link_and_anchor_resolves_and_nothing_comes_from_the_network(site):
    pages = _pages(site)
    parsed = {page: _parse(page) for page in pages}
    broken, remote = [], []
    for page, links in parsed.items():
        remote += [f"{page.relative_to(site)}: {url}" for url in links.remote]
        for url in links.targets:
            split = urllib.parse.urlsplit(url)
            target = (page.parent / urllib.parse.unquote(split.path)).resolve() if split.path else page
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {url} (no file)")
            elif split.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if urllib.parse.unquote(split.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)}: {url} (no such anchor)")
    assert len(pages) > 20
    assert not broken, "\n".join(broken[:30])
    assert not remote, "\n".join(remote[:30])


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_each_edition_has_its_landing_page_and_the_notebooks_in_reading_order(site, edition):
    base = site / book_site.SUBFOLDER[edition]
    landing = (base / "index.html").read_text(encoding="utf-8")
    assert landing == (base / f"{book_site.EDITIONS[edition]['root_doc']}.html").read_text(encoding="utf-8")
    assert ("Course map" if edition == "en" else "课程地图") in landing
    folder = book_site.EDITIONS[edition]["notebooks"]
    names = book_site.notebook_names(edition)
    assert [n for n in names if "_appendix_" in n] == names[-2:] == ["11_appendix_pretraining_payoff",
                                                                     "12_appendix_lunch_break"]
    sidebar = re.findall(r'class="reference internal" href="(' + re.escape(folder) + r'/\d\d_\w+)\.html"', landing)
    assert list(dict.fromkeys(sidebar)) == [f"{folder}/{name}" for name in names]


def test_a_notebook_page_links_its_notebook_colab_binder_and_the_other_edition(site):
    repo = write_badges.github_repo(source_url())
    for edition, other in (("en", "zh"), ("zh", "en")):
        folder = book_site.EDITIONS[edition]["notebooks"]
        page = site / book_site.SUBFOLDER[edition] / folder / "03_masking.html"
        hrefs = dict(re.findall(r'class="course-link course-link-(\w+)" href="([^"]+)"', page.read_text("utf-8")))
        assert (page.parent / hrefs["download"]).read_bytes() == (ROOT / folder / "03_masking.ipynb").read_bytes()
        assert hrefs["colab"] == write_badges.colab_url(repo, f"{folder}/03_masking.ipynb")
        assert hrefs["binder"] == write_badges.binder_url(repo, f"{folder}/03_masking.ipynb")
        other_page = (page.parent / hrefs["edition"]).resolve()
        assert other_page == (site / book_site.SUBFOLDER[other] / book_site.EDITIONS[other]["notebooks"]
                              / "03_masking.html").resolve()


def test_every_page_links_to_the_other_edition(site):
    without = [str(page.relative_to(site)) for page in _pages(site)
               if 'class="course-link course-link-edition"' not in page.read_text(encoding="utf-8")]
    assert not without


def test_the_set_up_cell_is_not_on_the_page_but_in_the_download(site):
    page = (site / "notebooks" / "01_why_log.html").read_text(encoding="utf-8")
    assert "MLM_COURSE_SOURCE" not in page
    assert "MLM_COURSE_SOURCE" in (site / "notebooks" / "01_why_log.ipynb").read_text(encoding="utf-8")


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_the_served_font_has_every_cjk_character_of_the_pages(site, edition):
    """Every CJK character in the edition's pages (text, code, outputs, search index) is in the web font it serves:
    the browser check below looks at a few pages as drawn, this one at every character of every page."""
    from fontTools.ttLib import TTFont

    base = site / book_site.SUBFOLDER[edition]
    cmap = TTFont(str(base / book_site.WEB_FONT)).getBestCmap()
    shown = {c for page in base.rglob("*.html") if "zh" not in page.relative_to(base).parts[:1] or edition == "zh"
             for c in html.unescape(page.read_text(encoding="utf-8")) if book_site.is_cjk(c)}
    assert len(shown) > (1000 if edition == "zh" else 20)
    missing = sorted(c for c in shown if ord(c) not in cmap)
    assert not missing, f"no glyph for {missing}: run scripts/build_cjk_font.py, which keeps the notebooks' characters"


# ---- in a browser -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(site):
    """``python -m http.server`` serving the site on a free local port: its base URL."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                "--directory", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 20
    while True:
        try:
            import urllib.request
            urllib.request.urlopen(base, timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("python -m http.server did not start")
            time.sleep(0.2)
    yield base
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium_driver(tmp_path_factory.mktemp("chromium"),
                             {"goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"}})
    driver.set_page_load_timeout(PAGE_LOAD_S)
    try:
        yield driver
    finally:
        driver.quit()


# waits for the page's fonts and, where the page has math, for MathJax to typeset it; then reports on the page
SETTLE = """
const done = arguments[arguments.length - 1];
const math = window.MathJax && MathJax.startup && MathJax.startup.promise;
Promise.all([document.fonts.ready, math || Promise.resolve()]).then(() => setTimeout(() => done({
  images: [...document.images].map(i => ({src: i.src, ok: i.complete && i.naturalWidth > 0})),
  math: document.querySelectorAll('mjx-container').length,
  mathjax: !!window.MathJax,
}), 100));
"""


def _open(driver, url: str) -> dict:
    """Load ``url``; returns the page's report (SETTLE) with its severe console messages and the requests it made
    to anything but the site."""
    driver.get_log("browser"), driver.get_log("performance")  # forget the previous page's
    driver.get(url)
    driver.set_script_timeout(PAGE_LOAD_S)
    report = driver.execute_async_script(SETTLE)
    report["errors"] = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    requested = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in requested if m["method"] == "Network.requestWillBeSent"]
    report["away"] = [u for u in urls if re.match(r"(https?|wss?)://", u) and not u.startswith("http://127.0.0.1:")]
    return report


def _page_urls(site: Path, base: str) -> list[str]:
    return [base + page.relative_to(site).as_posix() for page in _pages(site)]


def test_every_page_loads_over_http_without_console_errors_broken_images_or_network(site, server, browser):
    failures = []
    for url in _page_urls(site, server):
        report = _open(browser, url)
        bad_images = [i["src"] for i in report["images"] if not i["ok"]]
        if report["errors"] or bad_images or report["away"]:
            failures.append(f"{url}: errors {report['errors']}, images {bad_images}, network {report['away']}")
    assert not failures, "\n".join(failures)


def test_the_site_works_opened_from_disk(site, browser):
    base = site.as_uri() + "/"
    for page in ("index.html", "notebooks/05_objective.html", "zh/index.html", "zh/notebooks/zh/03_masking.html"):
        report = _open(browser, base + page)
        assert not report["errors"] and not report["away"], (page, report)
        assert all(i["ok"] for i in report["images"]), (page, report["images"])
    report = _open(browser, base + "notebooks/05_objective.html")
    assert report["math"] > 10 and len(report["images"]) > 3
    assert "03_masking" in " ".join(_search(browser, base, "en"))


# the text a reader sees outside code: math left untypeset would show its TeX
PROSE = """
const article = document.querySelector('article').cloneNode(true);
for (const e of article.querySelectorAll('.cell, pre, code, mjx-container, script')) e.remove();
return article.innerText;
"""


@pytest.mark.parametrize("page", ["notebooks/01_why_log.html", "notebooks/05_objective.html",
                                  "zh/notebooks/zh/05_objective.html"])
def test_math_is_typeset(site, server, browser, page):
    report = _open(browser, server + page)
    assert report["mathjax"] and report["math"] > 5, report
    prose = browser.execute_script(PROSE)
    raw = re.findall(r"\$[^$\n]+\$|\\frac|\\sum|\\log", prose)
    assert not raw, f"untypeset TeX on {page}: {raw[:5]}"


def _search(driver, base: str, edition: str, query: str = "80/10/10") -> list[str]:
    """The result links of the edition's search page for ``query``."""
    driver.get(f"{base}{book_site.SUBFOLDER[edition]}search.html?q={urllib.parse.quote(query)}")
    deadline = time.monotonic() + PAGE_LOAD_S
    while time.monotonic() < deadline:
        found = driver.execute_script(
            "const s = document.querySelector('#search-results .search-summary');"
            "return s && s.textContent.trim() ? [...document.querySelectorAll('#search-results ul.search li a')]"
            ".map(a => a.getAttribute('href')) : null;")
        if found is not None:
            return found
        time.sleep(0.2)
    pytest.fail(f"the {edition} search for {query!r} gave no summary within {PAGE_LOAD_S} s")


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_search_finds_the_masking_notebook(server, browser, edition):
    found = _search(browser, server, edition)
    folder = book_site.EDITIONS[edition]["notebooks"]
    assert any(href.startswith(f"{folder}/03_masking.html") for href in found), found


# Each CJK character the page shows, drawn on a canvas in the font of the element that shows it, next to U+2FE0 (a
# code point in the CJK ranges that no font has): a character drawn exactly like it is a missing-glyph box. That
# holds whichever font ends up drawing it: the course's (its .notdef), a system font's, or none.
BOXES = f"""
const cjk = /{CJK_JS}/gu, groups = new Map();
for (const e of document.body.querySelectorAll('*')) {{
  const own = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
  const chars = own.match(cjk);
  if (!chars || !e.getClientRects().length || getComputedStyle(e).visibility === 'hidden') continue;
  const style = getComputedStyle(e);
  const font = `${{style.fontStyle}} ${{style.fontWeight}} 28px ${{style.fontFamily}}`;
  if (!groups.has(font)) groups.set(font, new Set());
  chars.forEach(c => groups.get(font).add(c));
}}
const canvas = document.createElement('canvas');
canvas.width = canvas.height = 40;
const ctx = canvas.getContext('2d', {{willReadFrequently: true}});
const draw = (font, c) => {{
  ctx.clearRect(0, 0, 40, 40); ctx.font = font; ctx.fillText(c, 4, 32);
  return ctx.getImageData(0, 0, 40, 40).data;
}};
const same = (a, b) => a.every((v, i) => v === b[i]);
const boxes = [];
let checked = 0;
for (const [font, chars] of groups) {{
  const box = draw(font, '\\u2FE0');
  for (const c of chars) {{ checked += 1; if (same(draw(font, c), box)) boxes.push(c + ' in ' + font); }}
}}
return {{checked, boxes}};
"""


def missing_glyphs(driver) -> list[str]:
    """The CJK characters the page shows as missing-glyph boxes (BOXES); fails if it shows none at all."""
    found = driver.execute_script(BOXES)
    assert found["checked"] > 0, "no CJK character on the page"
    return found["boxes"]


@pytest.mark.parametrize("page", ["zh/index.html", "zh/notebooks/zh/02_tokens.html", "zh/notebooks/zh/03_masking.html",
                                  "zh/notebooks/zh/10_chinese_masking.html", "notebooks/02_tokens.html",
                                  "notebooks/10_chinese_masking.html"])
def test_chinese_text_has_no_missing_glyph(server, browser, page):
    _open(browser, server + page)
    assert not missing_glyphs(browser)


def test_the_glyph_check_fails_without_the_font(server, browser):
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*course-cjk-sans.woff"]})
    try:
        _open(browser, server + "zh/notebooks/zh/03_masking.html")
        assert len(missing_glyphs(browser)) > 20
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
