"""The course palette (Okabe–Ito), the colour helpers every figure shares, and the figure-rule check."""

from __future__ import annotations

from matplotlib.figure import Figure

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9", "bluish green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish purple": "#CC79A7",
}
"""The course palette (Okabe & Ito, 2008): distinguishable with the common colour-vision deficiencies."""

DTYPE_COLORS = {"float16": OKABE_ITO["orange"], "bfloat16": OKABE_ITO["reddish purple"],
                "float32": OKABE_ITO["blue"], "float64": OKABE_ITO["bluish green"]}
"""One colour per floating-point format, the same in every figure."""

SERIES_COLORS = (OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["bluish green"], OKABE_ITO["reddish purple"],
                 OKABE_ITO["vermillion"], OKABE_ITO["sky blue"])
"""Colours for the 1st, 2nd, … series of a figure whose series have no colour of their own."""


NOTEBOOK_DPI = 100
"""Pixels per inch of the notebook column ("≈ 10 in at 100 dpi"): a PNG pixel is shown as one column pixel."""

MAX_WIDTH_PX = 1000
"""The widest PNG a notebook may show: the 10-inch column at :data:`NOTEBOOK_DPI`; wider ones are shrunk to fit,
text and all. ``bbox_inches="tight"`` adds 0.1 in on each side, so a figure's drawn content must stay within 9.8 in."""

ALLOWED_COLORMAPS = frozenset({"Blues", "Greys", "gray", "binary"})
"""The colormaps a heatmap may use besides a ListedColormap of palette colours and greys: one hue (blue, the
course's heatmaps) or grey, light to dark, which reads the same with every colour-vision deficiency."""


def notebook_png(fig: Figure) -> bytes | None:
    """``fig`` as ``%matplotlib inline`` shows it: the PNG IPython's inline backend makes, with its ``dpi`` and
    ``bbox_inches`` (None for a figure it would not show: no axes, no lines)."""
    from IPython.core.pylabtools import print_figure
    from matplotlib_inline.config import InlineBackend

    return print_figure(fig, "png", **InlineBackend().print_figure_kwargs)


def _drawn(artist):
    """``artist`` and the artists below it that a render draws: visible, and no axis or spine of an axes that is off."""
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.spines import Spine

    alpha = artist.get_alpha()
    if not artist.get_visible() or (np.ndim(alpha) == 0 and alpha == 0):
        return
    yield artist
    for child in artist.get_children():
        if not (isinstance(artist, Axes) and not artist.axison and isinstance(child, Axis | Spine)):
            yield from _drawn(child)


def _colours(artist) -> list:
    """The RGBA colours ``artist`` paints with (a Line2D's line and markers, the face of filled ones; a patch's face and edge, a collection's
    faces and edges, a text's glyphs and box); edges of zero width left out, and a colour-mapped collection's
    colours (its colormap is checked instead)."""
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.markers import MarkerStyle
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    if isinstance(artist, Line2D):
        drawn = [artist.get_color()] if artist.get_linestyle() not in ("None", "") and artist.get_linewidth() else []
        marker = MarkerStyle(artist.get_marker())
        if marker.get_marker() not in ("None", "", " "):
            drawn += [artist.get_markeredgecolor()] + ([artist.get_markerfacecolor()] if marker.is_filled() else [])
        return drawn
    if isinstance(artist, Patch):
        return [artist.get_facecolor()] + ([artist.get_edgecolor()] if artist.get_linewidth() else [])
    if isinstance(artist, Collection):
        if artist.get_array() is not None:
            return []
        edges = list(artist.get_edgecolor()) if max(artist.get_linewidth(), default=0) else []
        return list(artist.get_facecolor()) + edges
    if isinstance(artist, Text) and artist.get_text().strip():
        box = artist.get_bbox_patch()
        return [artist.get_color()] + (_colours(box) if box is not None else [])
    return []


def _off_palette(colour) -> str | None:
    """The hex code of ``colour`` if it is neither transparent, a palette colour (alpha aside) nor a grey."""
    from matplotlib.colors import to_hex, to_rgba

    if to_rgba(colour)[3] == 0:
        return None
    code = to_hex(colour, keep_alpha=False)
    allowed = {c.lower() for c in OKABE_ITO.values()}
    return None if code in allowed or code[1:3] == code[3:5] == code[5:7] else code


def _colormap_problem(artist) -> str | None:
    """What is wrong with the colormap of a colour-mapped image, mesh or collection (None: nothing, or none used)."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap

    if not isinstance(artist, ScalarMappable) or artist.get_array() is None or artist.get_array().ndim > 2:
        return None
    cmap = artist.get_cmap()
    listed = isinstance(cmap, ListedColormap) and not any(_off_palette(c) for c in cmap.colors)
    if cmap.name in ALLOWED_COLORMAPS or listed:
        return None
    return (f"{type(artist).__name__} colormap {cmap.name!r} is neither built from the Okabe–Ito palette "
            f"nor one of {sorted(ALLOWED_COLORMAPS)}")


def figure_rule_violations(fig: Figure, *, max_width_px: int = MAX_WIDTH_PX, min_font_pt: float = 9.0) -> list[str]:
    """What in ``fig`` breaks the course's figure rules, measured on what the notebook shows (:func:`notebook_png`):
    a PNG wider than ``max_width_px``; drawn text smaller than ``min_font_pt`` at :data:`NOTEBOOK_DPI`; a drawn
    line, marker, patch, collection or text in a colour outside :data:`OKABE_ITO` (greys allowed, transparency
    ignored, alpha aside); a colormap outside the palette and :data:`ALLOWED_COLORMAPS`. Empty: the figure obeys them."""
    from matplotlib.text import Text

    png = notebook_png(fig)
    problems = []
    width = int.from_bytes(png[16:20], "big") if png else 0  # the PNG header's IHDR width
    if width > max_width_px:
        problems.append(f"the notebook shows the figure {width} px wide (at most {max_width_px} px)")
    scale = fig.dpi / NOTEBOOK_DPI
    for artist in _drawn(fig):
        if isinstance(artist, Text) and artist.get_text().strip() and artist.get_fontsize() * scale < min_font_pt:
            problems.append(f"text {artist.get_text()!r} is shown at {artist.get_fontsize() * scale:g} pt "
                            f"(at least {min_font_pt:g} pt)")
        codes = dict.fromkeys(code for code in map(_off_palette, _colours(artist)) if code)
        problems += [f"{type(artist).__name__} colour {code} is not in the Okabe–Ito palette" for code in codes]
        if (problem := _colormap_problem(artist)) is not None:
            problems.append(problem)
    return problems


def text_colour_on(fill: str) -> str:
    """"black" or "white", whichever contrasts more with the hex colour ``fill`` (WCAG relative luminance)."""
    channels = [int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "black" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "white"


def text_width_in(text: str, *, size: float = 9.0, weight: str = "normal") -> float:
    """Width in inches of ``text`` (its widest line) set at ``size`` pt in the default font, as a render draws it."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    font = FontProperties(size=size, weight=weight)
    widths = [TextPath((0, 0), line, prop=font).get_extents().width for line in text.split("\n") if line.strip()]
    return max(widths, default=0.0) / 72


def _shown_texts(artist):
    """The texts ``artist`` draws, each with where it is: every drawn text, and of each axis only its label, its
    offset text and the labels of the ticks in view (an axis keeps spare ticks that a render does not draw)."""
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.spines import Spine
    from matplotlib.text import Text

    alpha = artist.get_alpha()
    if not artist.get_visible() or (np.ndim(alpha) == 0 and alpha == 0):
        return
    if isinstance(artist, Axis):
        shown = [artist.label, artist.offsetText]
        for tick in artist._update_ticks():  # the ticks a render draws (matplotlib's own list)
            shown += [label for label in (tick.label1, tick.label2) if label.get_visible()]
        yield from ((t, f"{artist.axis_name} axis") for t in shown if t.get_visible() and t.get_text().strip())
        return
    if isinstance(artist, Text) and artist.get_text().strip():
        yield artist, type(artist).__name__.lower()
    for child in artist.get_children():
        if not (isinstance(artist, Axes) and not artist.axison and isinstance(child, Axis | Spine)):
            yield from _shown_texts(child)


def layout_problems(fig: Figure, *, tolerance_px: float = 0.5) -> list[str]:
    """What in ``fig``'s layout a reader cannot read, measured after drawing it as the notebook does: two drawn texts
    (titles, axis and tick labels, legend entries, annotations) whose boxes overlap by more than ``tolerance_px``;
    a legend that covers a plotted point (a vertex of a line or marker in data coordinates, an end of an error bar)
    or a text; a marker cut by the edge of its axes, or outside them. Empty: every text and point can be read."""
    from matplotlib.legend import Legend

    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    texts, seen = [], set()
    for text, where in _shown_texts(fig):
        if id(text) not in seen:
            seen.add(id(text))
            texts.append((text, where, text.get_window_extent(renderer).expanded(1, 1).padded(-tolerance_px)))
    problems = [f"text {a.get_text()!r} ({where_a}) overlaps text {b.get_text()!r} ({where_b})"
                for i, (a, where_a, box_a) in enumerate(texts) for b, where_b, box_b in texts[i + 1:]
                if box_a.overlaps(box_b)]
    for legend in (a for a in _drawn(fig) if isinstance(a, Legend)):
        problems += _legend_problems(fig, legend, texts, renderer, tolerance_px)
    for ax in fig.axes:
        problems += _cut_markers(fig, ax, renderer, tolerance_px)
    return problems


def _plotted_points(ax) -> list:
    """Display coordinates of every vertex of ``ax``'s lines and line collections drawn in data coordinates."""
    from matplotlib.collections import LineCollection

    points = []
    for line in ax.lines:
        if line.get_transform().contains_branch(ax.transData) and line.get_visible() and len(line.get_xydata()):
            points += list(line.get_transform().transform(line.get_xydata()))
    for collection in ax.collections:
        if isinstance(collection, LineCollection) and collection.get_visible():
            for segment in collection.get_segments():
                points += list(collection.get_transform().transform(segment))
    return points


def _legend_problems(fig: Figure, legend, texts: list, renderer, tolerance_px: float) -> list[str]:
    """The texts outside ``legend`` it covers, and for each axes the first plotted point it covers."""
    import numpy as np
    from matplotlib.text import Text

    in_legend = {id(t) for t in legend.findobj(Text)}
    frame = legend.get_window_extent(renderer).padded(-tolerance_px)
    problems = [f"a legend covers text {text.get_text()!r} ({where})" for text, where, box in texts
                if id(text) not in in_legend and frame.overlaps(box)]
    for ax in fig.axes:
        view = ax.get_window_extent(renderer)
        if any(np.isfinite([x, y]).all() and view.contains(x, y) and frame.contains(x, y)
               for x, y in _plotted_points(ax)):
            problems.append(f"a legend covers a plotted point of {ax.get_title() or 'an axes'!r}")
    return problems


def _cut_markers(fig: Figure, ax, renderer, tolerance_px: float) -> list[str]:
    """Each line of ``ax`` with a marker that the axes' edge cuts, or that lies outside the axes."""
    import numpy as np
    from matplotlib.markers import MarkerStyle

    view, problems = ax.get_window_extent(renderer), []
    for line in ax.lines:
        marker = MarkerStyle(line.get_marker()).get_marker()
        if not line.get_visible() or not line.get_clip_on() or len(line.get_xydata()) == 0 \
                or marker in ("None", "", " ") or not line.get_transform().contains_branch(ax.transData):
            continue
        half = line.get_markersize() * fig.dpi / 72 / 2
        wide = 0.0 if marker in ("|", 2, 3) else half  # a vertical tick (an error bar's cap) has no width
        tall = 0.0 if marker in ("_", 0, 1) else half  # nor a horizontal one height
        inside = [view.x0 + wide - tolerance_px <= x <= view.x1 - wide + tolerance_px
                  and view.y0 + tall - tolerance_px <= y <= view.y1 - tall + tolerance_px
                  for x, y in line.get_transform().transform(line.get_xydata()) if np.isfinite([x, y]).all()]
        if not all(inside):
            problems.append(f"a marker of {line.get_label()!r} in {ax.get_title() or 'an axes'!r} is cut by the "
                            "axes' edge or lies outside them")
    return problems
