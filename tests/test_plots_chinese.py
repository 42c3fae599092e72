"""plots.hit_rate_bars: bars from zero at hits / trials, Wilson intervals as error bars, reference lines named,
within the figure rules."""

import matplotlib.pyplot as plt
import pytest
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

from mlm_course import plots
from mlm_course.statistics import wilson_interval


def test_hit_rate_bars_draws_each_rate_with_its_interval_and_the_reference():
    groups = {"character masking": {"top-1": (40, 100), "top-5": (70, 100)}, "word masking": {"top-1": (3, 100)}}
    fig = plots.hit_rate_bars(groups, title="Every held-out character masked alone", ylabel="characters guessed (%)",
                              reference={"unigram": 0.02})
    assert isinstance(fig, Figure) and plots.figure_rule_violations(fig) == []
    ax = fig.axes[0]
    heights = sorted(round(bar.get_height(), 6) for bar in ax.patches)
    assert heights == [3.0, 40.0, 70.0]
    assert ax.get_ylim()[0] == 0 and "95% intervals" in ax.get_title()
    low, high = wilson_interval(40, 100)
    top1 = next(c for c in ax.containers if isinstance(c, BarContainer))
    segments = top1.errorbar.lines[2][0].get_segments()  # one vertical segment per bar
    assert [segments[0][0][1], segments[0][1][1]] == pytest.approx([100 * low, 100 * high])
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert sorted(labels) == ["top-1", "top-5", "unigram (2.0%)"]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(groups)
    plt.close(fig)


def test_a_reference_line_above_the_bars_stays_inside_the_axes():
    fig = plots.hit_rate_bars({"g": {"top-1": (3, 100)}}, title="t", ylabel="y (%)", reference={"ceiling": 0.5})
    assert fig.axes[0].get_ylim()[1] > 50
    plt.close(fig)


def test_hit_rate_bars_refuses_nothing_to_draw():
    with pytest.raises(ValueError, match="groups is empty"):
        plots.hit_rate_bars({}, title="t", ylabel="y")
