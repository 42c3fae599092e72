"""plots for 05_objective: axes, labels and the plotted data."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from mlm_course import objective, plots


def test_joint_vs_product_shows_both_tables():
    f = objective.factorised_joint([[0.5, 0.0], [0.0, 0.5]])
    fig = plots.joint_vs_product(f.joint, f.product, ["new", "los"], ["york", "angeles"], title="t")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left, right = fig.axes
    assert np.allclose(left.images[0].get_array(), [[0.5, 0.0], [0.0, 0.5]])
    assert np.allclose(right.images[0].get_array(), [[0.25, 0.25], [0.25, 0.25]])
    assert [t.get_text() for t in right.texts] == ["0.25"] * 4
    assert [t.get_text() for t in left.get_yticklabels()] == ["new", "los"]
    assert [t.get_text() for t in left.get_xticklabels()] == ["york", "angeles"]
    assert right.get_title() == "product p(a) · p(b)" and fig._suptitle.get_text() == "t"
    with pytest.raises(ValueError, match="tables"):
        plots.joint_vs_product(f.joint, f.product, ["new"], ["york", "angeles"])


def _result(loss):
    return {g: {"tokens": 10, "loss": loss + i, "top1": 0.1, "mask": 0.0, "copy": 0.5}
            for i, g in enumerate(("all",) + objective.ACTIONS)}


def test_loss_by_action_bars_one_group_per_action_one_colour_per_model():
    fig = plots.loss_by_action_bars({"correct": _result(1.0), "buggy": _result(5.0)})
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["correct", "buggy"]
    assert [t.get_text() for t in ax.get_xticklabels()][1] == "[MASK]\n(10 tokens)"
    assert ax.get_ylabel() == "loss"
    fig = plots.loss_by_action_bars({"a": _result(0.0)}, metric="copy")
    assert [p.get_height() for p in fig.axes[0].patches] == [0.5] * 4 and fig.axes[0].get_ylabel() == "copy"
    with pytest.raises(ValueError, match="at least one"):
        plots.loss_by_action_bars({})


def test_pll_pairs_plot_splits_wins_and_losses():
    fig = plots.pll_pairs_plot([-10.0, -20.0, -30.0], [-15.0, -12.0, -40.0])
    ax = fig.axes[0]
    wins, losses = ax.collections
    assert np.allclose(wins.get_offsets(), [[-15.0, -10.0], [-40.0, -30.0]])
    assert np.allclose(losses.get_offsets(), [[-12.0, -20.0]])
    assert ax.get_title() == "grammatical higher in 2 of 3 pairs"
    assert "scrambled" in ax.get_xlabel() and "grammatical" in ax.get_ylabel()
    with pytest.raises(ValueError, match="one PLL"):
        plots.pll_pairs_plot([-1.0], [])
