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


def figure_rule_violations(fig: Figure, *, max_width_in: float = 10.0, min_font_pt: float = 9.0) -> list[str]:
    """What in ``fig`` breaks the course's figure rules: wider than the notebook column, visible text smaller than
    ``min_font_pt``, a line or patch colour outside :data:`OKABE_ITO` (greys, black and white allowed).
    An empty list means the figure obeys them."""
    from matplotlib.colors import to_hex, to_rgba
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    problems = []
    width = float(fig.get_size_inches()[0])
    if width > max_width_in + 1e-9:
        problems.append(f"the figure is {width:.2f} in wide (at most {max_width_in:g} in)")
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.get_fontsize() < min_font_pt:
            problems.append(f"text {text.get_text()!r} is {text.get_fontsize():g} pt (at least {min_font_pt:g} pt)")
    allowed = {c.lower() for c in OKABE_ITO.values()}
    for artist in fig.findobj(lambda a: isinstance(a, Line2D | Patch) and a.get_visible()):
        colour = artist.get_color() if isinstance(artist, Line2D) else artist.get_facecolor()
        if to_rgba(colour)[3] == 0:
            continue
        code = to_hex(colour)
        if code not in allowed and not code[1:3] == code[3:5] == code[5:7]:
            problems.append(f"{type(artist).__name__} colour {code} is not in the Okabe–Ito palette")
    return problems


def text_colour_on(fill: str) -> str:
    """"black" or "white", whichever contrasts more with the hex colour ``fill`` (WCAG relative luminance)."""
    channels = [int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "black" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "white"
