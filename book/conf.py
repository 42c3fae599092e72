"""Sphinx configuration of the course as a book (``make book``; scripts/book_site.py says what is built how).

    sphinx-build -b html -c book . build/book/html             # English edition
    sphinx-build -b html -c book -t zh . build/book/html/zh    # Chinese edition

The source folder is the repository: the pages are README.md (or README.zh-CN.md) and the committed notebooks, with
their stored outputs; nothing is executed.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from book_site import EDITIONS  # noqa: E402

course_edition = "zh" if tags.has("zh") else "en"  # noqa: F821 (Sphinx passes `tags` to this file)
_edition = EDITIONS[course_edition]

project = "mlm_course" if course_edition == "en" else "mlm_course 中文版"
author = "the mlm_course authors"
copyright = "the mlm_course authors, Apache-2.0"
language = _edition["language"]
root_doc = _edition["root_doc"]
include_patterns = [f"{root_doc}.md", f"{_edition['notebooks']}/[0-9][0-9]_*.ipynb"]
if course_edition == "zh":
    include_patterns.append("notebooks/zh/GLOSSARY.md")
exclude_patterns = [".*", "build", "runs", "mlm_course", "tests", "benchmarks", "scripts", "*.egg-info",
                    "notebooks/runs", "notebooks/results", "notebooks/zh/runs"]

extensions = ["myst_nb", "sphinx-mathjax-offline", "book_site"]
nb_execution_mode = "off"  # the stored outputs, as committed
nb_ipywidgets_js = {}  # no widget manager from a CDN: the stored widget views are not interactive on the site
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["misc.highlighting_failure"]

html_theme = "sphinx_book_theme"
html_favicon = "_static/favicon.svg"
html_context = {"default_mode": "auto"}  # else the theme logs "Got invalid theme mode" as an error on a first visit
html_title = "mlm_course" if course_edition == "en" else "mlm_course（中文版）"
html_static_path = ["_static"]
html_extra_path = ["extra"]  # NOTICE.txt: the licences of what the site ships
templates_path = ["_templates"]
html_css_files = ["course.css", "course-cjk.css"]
html_copy_source = False  # each page links its notebook as committed instead (copied beside the page)
html_show_sourcelink = False
html_theme_options = {
    "use_download_button": False,
    "use_fullscreen_button": True,
    "use_repository_button": False,
    "launch_buttons": {},
    "article_header_start": ["toggle-primary-sidebar.html", "course-links.html"],
    "show_toc_level": 2,
    # the landing page's course map is a wide table: give it the page's width (its sections stay in the sidebar)
    "secondary_sidebar_items": {"**": ["page-toc.html"], root_doc: []},
}
