"""plots.style.figure_rule_violations: measured on the PNG the notebook shows, over every kind of artist drawn."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402

from mlm_course import plots  # noqa: E402
from mlm_course.plots import style  # noqa: E402

BLUE, ORANGE = plots.OKABE_ITO["blue"], plots.OKABE_ITO["orange"]
OFF = "#1f77b4"  # matplotlib's default blue: not an Okabe–Ito colour


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _png_width(fig) -> int:
    return int.from_bytes(style.notebook_png(fig)[16:20], "big")


def test_a_figure_that_obeys_every_rule_passes():
    """Every kind of artist at once, in palette colours, greys and the allowed colormaps: nothing to report."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
    _ = a.plot([0, 1, 2], [1, 3, 2], "o-", color=BLUE, label="line")
    _ = a.scatter([0, 1], [2, 2], color=ORANGE, label="scatter")
    _ = a.errorbar([0.5, 1.5], [1, 2], yerr=0.3, fmt="s", color=plots.OKABE_ITO["vermillion"], capsize=3)
    _ = a.fill_between([0, 1, 2], [0, 1, 0], [1, 2, 1], color=BLUE, alpha=0.2)
    _ = a.bar([2.5], [1], color=plots.OKABE_ITO["bluish green"], edgecolor="black")
    _ = a.annotate("peak", (1, 3), color="#555555")
    a.legend(fontsize=9)
    a.set(xlabel="x (units)", ylabel="y (units)", title="every artist")
    image = b.imshow(np.arange(6).reshape(2, 3), cmap="Blues")
    fig.colorbar(image, ax=b, label="value (units)")
    _ = b.pcolormesh(np.arange(4).reshape(2, 2), cmap=ListedColormap([BLUE, ORANGE, "white", "#bbbbbb"]))
    assert plots.figure_rule_violations(fig) == []


def test_a_figure_rendered_wider_than_the_column_is_caught():
    fig, ax = plt.subplots(figsize=(10, 3), dpi=150)  # 10 in at 150 dpi: about 1,300 px
    _ = ax.plot([0, 1], [0, 1], color=BLUE)
    width = _png_width(fig)
    assert width > style.MAX_WIDTH_PX
    assert plots.figure_rule_violations(fig) == [
        f"the notebook shows the figure {width} px wide (at most {style.MAX_WIDTH_PX} px)"]
    fig.set_dpi(100)  # the same figure at the notebook's 100 dpi fits
    assert _png_width(fig) <= style.MAX_WIDTH_PX and plots.figure_rule_violations(fig) == []


def test_a_legend_outside_the_axes_that_widens_the_tight_png_is_caught():
    fig, ax = plt.subplots(figsize=(9.5, 3))  # no layout engine to make room: the legend sticks out
    _ = ax.plot([0, 1], [0, 1], color=BLUE, label="a label long enough to need a lot of room beside the axes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside the canvas: bbox_inches="tight" widens the PNG
    assert fig.get_figwidth() < 10 and _png_width(fig) > style.MAX_WIDTH_PX
    assert [p for p in plots.figure_rule_violations(fig) if "px wide" in p]


@pytest.mark.parametrize(("draw", "kinds"), [
    (lambda ax: ax.scatter([0, 1], [0, 1], color=OFF), {"PathCollection"}),
    (lambda ax: ax.errorbar([0, 1], [0, 1], yerr=0.2, fmt="none", ecolor=OFF), {"LineCollection"}),
    (lambda ax: ax.errorbar([0, 1], [0, 1], yerr=0.2, fmt="none", ecolor=OFF, capsize=3), {"LineCollection", "Line2D"}),
    (lambda ax: ax.fill_between([0, 1], [0, 1], [1, 2], color=OFF, alpha=0.3), {"PolyCollection"}),
    (lambda ax: ax.vlines([0.5], 0, 1, color=OFF), {"LineCollection"}),
    (lambda ax: ax.bar([0], [1], color=BLUE, edgecolor=OFF, linewidth=1), {"Rectangle"}),
    (lambda ax: ax.imshow([[0, 1], [2, 3]], cmap="viridis"), {"AxesImage"}),
    (lambda ax: ax.pcolormesh([[0, 1], [2, 3]], cmap="magma"), {"QuadMesh"}),
    (lambda ax: ax.imshow([[0, 1]], cmap=ListedColormap([BLUE, OFF])), {"AxesImage"}),
    (lambda ax: ax.set_title("title", color=OFF), {"Text"}),
    (lambda ax: ax.tick_params(labelcolor=OFF), {"Text"}),
    (lambda ax: ax.annotate("note", (0.5, 0.5), color=OFF), {"Annotation"}),
    (lambda ax: (ax.plot([0, 1], color=BLUE, label="x"), ax.legend(labelcolor=OFF)), {"Text"}),
], ids=["scatter", "errorbar bars", "errorbar caps", "fill_between", "vlines", "bar edge", "imshow colormap",
        "pcolormesh colormap", "listed colormap", "title colour", "tick label colour", "annotation colour",
        "legend text colour"])
def test_each_kind_of_artist_in_a_colour_outside_the_palette_is_caught(draw, kinds):
    fig, ax = plt.subplots(figsize=(5, 3))
    _ = draw(ax)
    problems = plots.figure_rule_violations(fig)
    assert all(OFF in p or "colormap" in p for p in problems) and problems, problems
    flagged = {p.split()[0] for p in problems}
    assert len(flagged) == len(kinds) and all(any(f.endswith(k) for f in flagged) for k in kinds), problems


def test_transparent_artists_are_ignored_and_alpha_does_not_change_a_palette_colour():
    fig, ax = plt.subplots(figsize=(5, 3))
    _ = ax.plot([0, 1], [0, 1], color=BLUE, alpha=0.3)
    _ = ax.fill_between([0, 1], [0, 1], [1, 2], color=ORANGE, alpha=0.15)
    _ = ax.plot([0, 1], [1, 0], color=OFF, alpha=0)
    _ = ax.scatter([0.5], [0.5], color=(0.12, 0.47, 0.71, 0.0))
    assert plots.figure_rule_violations(fig) == []
    _ = ax.plot([0, 1], [0.5, 0.5], color=OFF, alpha=0.5)
    assert plots.figure_rule_violations(fig) == ["Line2D colour #1f77b4 is not in the Okabe–Ito palette"]


def test_small_text_is_caught_at_the_size_the_notebook_shows_it():
    fig, ax = plt.subplots(figsize=(5, 3))
    _ = ax.plot([0, 1], [0, 1], color=BLUE)
    _ = ax.text(0.5, 0.5, "tiny", fontsize=8)
    assert plots.figure_rule_violations(fig) == ["text 'tiny' is shown at 8 pt (at least 9 pt)"]
    fig, ax = plt.subplots(figsize=(5, 3), dpi=80)  # 12 pt at 80 dpi: shown as 9.6 pt; 10 pt as 8 pt
    _ = ax.plot([0, 1], [0, 1], color=BLUE)
    ax.tick_params(labelsize=12)
    _ = ax.set_title("a title", fontsize=10)
    assert plots.figure_rule_violations(fig) == ["text 'a title' is shown at 8 pt (at least 9 pt)"]


def test_artists_that_are_not_drawn_are_not_judged():
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3))
    a.tick_params(labelsize=5, labelcolor=OFF)
    a.axis("off")  # its ticks, labels and spines are not drawn
    _ = b.plot([0, 1], [0, 1], color=OFF, visible=False)
    _ = b.text(0.5, 0.5, "hidden", fontsize=5, visible=False)
    assert plots.figure_rule_violations(fig) == []


def test_a_figure_laid_out_cleanly_has_no_layout_problems():
    fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    _ = ax.plot([0, 1, 2], [1, 3, 2], "o-", color=BLUE, label="line")
    _ = ax.annotate("peak", (1, 3), xytext=(0, 6), textcoords="offset points", ha="center")
    ax.set(xlabel="x (units)", ylabel="y (units)", title="clean", ylim=(0, 4))
    fig.legend(loc="outside lower center")
    assert plots.layout_problems(fig) == []


def test_overprinting_texts_are_caught_with_their_words():
    fig, ax = plt.subplots(figsize=(6, 3))
    _ = ax.plot([1, 2], [1, 2], color=BLUE)
    _ = ax.text(1.5, 1.5, "2/3 collapsed")
    _ = ax.text(1.52, 1.5, "3/3 collapsed")
    assert plots.layout_problems(fig) == ["text '2/3 collapsed' (text) overlaps text '3/3 collapsed' (text)"]


def test_tick_labels_that_run_together_and_a_title_on_the_y_label_are_caught():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xticks([1, 1.05], ["1,000", "2,180"])
    ax.set_xlim(0, 2)
    assert any("'1,000' (x axis) overlaps text '2,180' (x axis)" in p for p in plots.layout_problems(fig))
    fig, ax = plt.subplots(figsize=(6, 2), layout="constrained")
    ax.set_ylabel("a y label far longer than the axes are tall, so it runs up into the title")
    fig.suptitle("a title as wide as the whole figure, reaching over the y label on the left")
    assert any("y axis" in p and "overlaps" in p for p in plots.layout_problems(fig))


def test_a_legend_over_plotted_points_or_text_is_caught():
    fig, ax = plt.subplots(figsize=(4, 3))
    _ = ax.plot([0, 1, 2, 3], [0, 1, 2, 3], "o", color=BLUE, label="points")
    ax.set_ylim(-1, 3.3)
    ax.legend(loc="upper right")  # right on top of the point (3, 3)
    assert any(p.startswith("a legend covers a plotted point") for p in plots.layout_problems(fig))
    fig, ax = plt.subplots(figsize=(4, 3))
    _ = ax.plot([0, 1], [0, 0], "o", color=BLUE, label="points")
    _ = ax.text(0.9, 0.9, "+11.0", transform=ax.transAxes, ha="right", va="top")
    ax.legend(loc="upper right")
    assert "a legend covers text '+11.0' (text)" in plots.layout_problems(fig)


def test_a_marker_cut_by_the_frame_is_caught_and_a_cap_on_its_own_axis_is_not():
    fig, ax = plt.subplots(figsize=(4, 3))
    _ = ax.plot([0, 1], [0.6, 0.725], "*", ms=14, color=BLUE, label="best")
    ax.set_ylim(0.6, 0.73)  # the star at the top sticks out of the axes
    assert plots.layout_problems(fig) == [
        "a marker of 'best' in 'an axes' is cut by the axes' edge or lies outside them"]
    fig, ax = plt.subplots(figsize=(4, 3))
    _ = ax.errorbar([1, 2], [0.0, 0.5], yerr=[[0.0, 0.1], [0.0, 0.1]], fmt="none", capsize=3, color=BLUE)
    ax.set(xlim=(0, 3), ylim=(0, 1))  # a zero-width interval's caps lie on the axis, which cuts nothing of them
    assert plots.layout_problems(fig) == []
