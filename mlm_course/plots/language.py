"""Figures in the notebook's language: English, or Chinese for the 中文版 in ``notebooks/zh/``.

The two editions run identical code cells, so a figure function cannot be told the language: it reads it.
:func:`figure_language` is ``MLM_COURSE_LANG`` (``en`` or ``zh``) when that is set, else ``zh`` for a notebook in
a folder named ``zh`` (Jupyter and nbconvert start the kernel in the notebook's folder; JupyterLab also names the
notebook in ``JPY_SESSION_NAME``), else ``en``. In Colab, set ``os.environ["MLM_COURSE_LANG"] = "zh"`` first.

Every public figure function is wrapped in :func:`localised`. In Chinese it first sets the bundled CJK font
(:func:`use_cjk_font`) as the fallback after the Latin one, then rewrites the finished figure's titles, axis
labels, legend entries, tick labels and annotations with :data:`ZH_LABELS`. A key of that table is the English
text, or a template whose ``{}`` stands for any text (a number, a model's name); the Chinese value puts the same
pieces back in order, each one translated too when the table knows it. Text that is data (tokens, sentences)
is marked with :func:`mark_as_data` and left alone.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from matplotlib.figure import Figure

from mlm_course.plots.zh_labels import FIGURE_LABELS, KEEP_IN_ENGLISH, ZH_LABELS

LANGUAGE_ENV_VAR = "MLM_COURSE_LANG"
LANGUAGES = ("en", "zh")
CJK_FAMILY = "Course CJK Sans"
CJK_FONT_FILE = "CourseCJKSans-Regular.otf"
DATA_GID = "data"
_ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")
_KEPT = re.compile("|".join(rf"(?<![A-Za-z]){re.escape(term)}(?![A-Za-z])"
                            for term in sorted(KEEP_IN_ENGLISH, key=len, reverse=True)))


def figure_language() -> str:
    """``en`` or ``zh``: ``MLM_COURSE_LANG`` if set, else ``zh`` inside a ``zh`` folder of notebooks, else ``en``."""
    chosen = os.environ.get(LANGUAGE_ENV_VAR, "").strip().lower()
    if chosen:
        if chosen not in LANGUAGES:
            raise ValueError(f"{LANGUAGE_ENV_VAR}={chosen!r}: set it to one of {', '.join(LANGUAGES)} "
                             "(or unset it to follow the notebook's folder).")
        return chosen
    session = os.environ.get("JPY_SESSION_NAME", "")
    folder = Path(session).parent if session.endswith(".ipynb") else Path.cwd()
    return "zh" if folder.name == "zh" else "en"


def cjk_font_path() -> Path:
    """The bundled subset of Noto Sans CJK SC (OFL-1.1; ``mlm_course/data/fonts/``, see DATA.md)."""
    return Path(__file__).resolve().parents[1] / "data" / "fonts" / CJK_FONT_FILE


def use_cjk_font() -> None:
    """Register the bundled CJK font and add it after the families in ``font.family``: Latin letters, digits and
    symbols keep their font, and characters it lacks fall back to the CJK one."""
    import matplotlib
    from matplotlib import font_manager

    if CJK_FAMILY not in {entry.name for entry in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(cjk_font_path()))
    families = list(matplotlib.rcParams["font.family"])
    if CJK_FAMILY not in families:
        matplotlib.rcParams["font.family"] = [*families, CJK_FAMILY]


@functools.cache
def _templates() -> list[tuple[re.Pattern, str]]:
    """The keys with ``{}`` as regular expressions, the longest fixed text first (the most specific wins)."""
    keyed = [(key, value) for key, value in ZH_LABELS.items() if "{}" in key]
    keyed.sort(key=lambda item: -len(item[0].replace("{}", "")))
    return [(re.compile("^" + "(.+?)".join(map(re.escape, key.split("{}"))) + "$", re.DOTALL), value)
            for key, value in keyed]


def translate(text: str, labels: dict[str, str] = ZH_LABELS) -> str | None:
    """The Chinese of ``text`` by ``labels`` (:data:`ZH_LABELS`, or a figure's own table over it), or None. A
    template counts only when each of its pieces is translated in turn or holds no English word."""
    if text in labels:
        return labels[text]
    for pattern, value in _templates():
        match = pattern.match(text)
        if match is None:
            continue
        pieces = [translate(piece, labels) or piece for piece in match.groups()]
        if not any(map(needs_translation, pieces)):  # else a looser template matched English it cannot translate
            return value.format(*pieces)
    return None


def needs_translation(text: str) -> bool:
    """Whether ``text`` still holds an English word (3 letters or more) outside :data:`KEEP_IN_ENGLISH`."""
    return bool(_ENGLISH_WORD.search(_KEPT.sub(" ", text)))


def mark_as_data(*artists) -> None:
    """Mark texts or axes (their tick labels) as data, such as tokens or sentences, which stay as they are."""
    for artist in artists:
        artist.set_gid(DATA_GID)


def _all_axes(fig: Figure):
    """``fig``'s axes and the axes they carry (a ``secondary_yaxis``, say), which ``fig.axes`` leaves out."""
    for ax in fig.axes:
        yield ax
        yield from ax.child_axes


def _label_texts(fig: Figure):
    """The texts of ``fig`` that name things: titles, axis labels and legend entries (and legend titles)."""
    for ax in _all_axes(fig):
        yield from (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label)
        legend = ax.get_legend()
        if legend is not None:
            yield from (legend.get_title(), *legend.get_texts())
    yield from (t for t in (fig._suptitle, fig._supxlabel, fig._supylabel) if t is not None)
    for legend in fig.legends:
        yield from (legend.get_title(), *legend.get_texts())


def _data_tick_labels(fig: Figure):
    """The tick labels of the axes marked as data."""
    for ax in _all_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_gid() == DATA_GID:
                yield from (*axis.get_majorticklabels(), *axis.get_minorticklabels())


def _fixed_tick_labels(fig: Figure):
    """The fixed tick labels of ``fig``'s axes (``set_xticks(positions, labels)``), the data axes left out: each as
    the dict {position: label} that matplotlib formats them from, which can be rewritten in place."""
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for ax in _all_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_gid() == DATA_GID:
                continue
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, FixedFormatter):  # set_ticklabels without a FixedLocator
                    formatter.seq = dict(enumerate(formatter.seq))  # it reads seq[pos]: a dict serves as well
                    yield formatter.seq
                elif isinstance(formatter, FuncFormatter) and isinstance(formatter.func, functools.partial) \
                        and formatter.func.args and isinstance(formatter.func.args[0], dict):
                    yield formatter.func.args[0]  # Axis._format_with_dict's table


def localise(fig: Figure, labels: dict[str, str] = ZH_LABELS) -> list[str]:
    """Rewrite ``fig``'s text in Chinese by ``labels``; return the label texts (titles, axis labels, legend entries,
    tick labels) left in English because the table has no entry for them. Call :func:`use_cjk_font` before
    drawing ``fig``: a text keeps the font families set when it was made."""
    from matplotlib.text import Text

    missing = []
    label_ids = {id(text) for text in _label_texts(fig)}
    data = {id(text) for text in _data_tick_labels(fig)}
    for text in fig.findobj(Text):
        if text.get_gid() == DATA_GID or id(text) in data or not text.get_text().strip():
            continue
        chinese = translate(text.get_text(), labels)
        if chinese is not None:
            text.set_text(chinese)
        elif id(text) in label_ids and needs_translation(text.get_text()):
            missing.append(text.get_text())
    for table in _fixed_tick_labels(fig):
        for position, label in table.items():
            chinese = translate(str(label), labels)
            if chinese is not None:
                table[position] = chinese
            elif needs_translation(str(label)):
                missing.append(str(label))
    return sorted(set(missing))


class UntranslatedFigureText(UserWarning):
    """A figure drawn in Chinese still names something in English: add its text to ``ZH_LABELS``."""


def localised(function):
    """Wrap a figure function: in Chinese (:func:`figure_language`), set the CJK font, draw, then translate the
    figure (by :data:`ZH_LABELS`, with the function's own :data:`FIGURE_LABELS` over it), warning with
    :class:`UntranslatedFigureText` about any label the table lacks."""
    import warnings

    @functools.wraps(function)
    def draw(*args, **kwargs):
        if figure_language() != "zh":
            return function(*args, **kwargs)
        use_cjk_font()
        fig = function(*args, **kwargs)
        missing = localise(fig, {**ZH_LABELS, **FIGURE_LABELS.get(function.__name__, {})})
        if missing:
            warnings.warn(f"{function.__name__}: no Chinese for {missing} in mlm_course/plots/zh_labels.py",
                          UntranslatedFigureText, stacklevel=2)
        return fig

    return draw
