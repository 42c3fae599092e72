"""plots for 05_objective: axes, labels and the plotted data."""

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from mlm_course import masking, objective, plots


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
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="tables"):
        plots.joint_vs_product(f.joint, f.product, ["new"], ["york", "angeles"])


def _result(loss):
    return {g: {"tokens": 10, "loss": loss + i, "top1": 0.1, "mask": 0.0, "copy": 0.5, "loss_ci95": 0.25}
            for i, g in enumerate(("all", *masking.ACTION_NAMES[1:]))}


def test_loss_by_action_bars_one_group_per_action_one_colour_per_model():
    fig = plots.loss_by_action_bars({"correct": _result(1.0), "buggy": _result(5.0)})
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["correct", "buggy"]
    assert [t.get_text() for t in ax.get_xticklabels()][1] == "[MASK]\n(10 tokens)"
    assert ax.get_ylabel() == "cross-entropy (nats)"
    spans = [seg for bars in ax.containers if hasattr(bars, "errorbar")
             for seg in bars.errorbar.lines[2][0].get_segments()]  # one vertical interval per bar, height ± 0.25
    np.testing.assert_allclose([(low, high) for (_, low), (_, high) in spans], [(h - 0.25, h + 0.25) for h in heights])
    colours = [p.get_facecolor() for p in ax.patches]
    assert colours[0] != colours[4] and colours[0] == to_rgba(plots.SERIES_COLORS[0])
    assert plots.figure_rule_violations(fig) == []
    fig = plots.loss_by_action_bars({"a": _result(0.0)}, metric="copy")
    assert [p.get_height() for p in fig.axes[0].patches] == [0.5] * 4
    assert fig.axes[0].get_ylabel() == "share copying the shown token"
    assert all(bars.errorbar is None for bars in fig.axes[0].containers)  # no interval for a share without one
    assert plots.figure_rule_violations(fig) == []
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
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="one PLL"):
        plots.pll_pairs_plot([-1.0], [])


def _history(losses):
    return [{"step": 10 * (k + 1), "split": "train", "loss": v} for k, v in enumerate(losses)]


def test_training_loss_curves_one_line_per_run_and_the_heldout_marker():
    fig = plots.training_loss_curves({"correct": _history([7.0, 6.5]), "bug": _history([5.0, 1.0, 0.5])},
                                     heldout={"bug": 9.8})
    ax = fig.axes[0]
    correct, bug, marker = ax.lines
    np.testing.assert_allclose(correct.get_xydata(), [[10, 7.0], [20, 6.5]])
    np.testing.assert_allclose(bug.get_xydata(), [[10, 5.0], [20, 1.0], [30, 0.5]])
    np.testing.assert_allclose(marker.get_xydata(), [[30, 9.8]])  # at the bug run's last step
    assert marker.get_color() == bug.get_color() != correct.get_color()
    assert ax.get_ylim()[0] == 0 and "nats" in ax.get_ylabel() and ax.get_xlabel() == "optimiser step"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["correct", "bug (held-out 9.80)"]  # one per run
    assert "held-out" in ax.get_legend().get_title().get_text()
    assert plots.figure_rule_violations(fig) == []
    # equal curves stay visible: later runs thinner, on top, in their own line style; the unigram line is named
    fig = plots.training_loss_curves({"correct": _history([7.0, 6.5]), "100 % [MASK]": _history([7.0, 6.5])},
                                     heldout={"correct": 6.2, "100 % [MASK]": 6.2}, unigram={"loss": 6.1})
    first, ring, second, small_ring, unigram = fig.axes[0].lines
    assert first.get_linewidth() > second.get_linewidth() and first.get_zorder() < second.get_zorder()
    assert first.get_linestyle() != second.get_linestyle() and ring.get_markersize() > small_ring.get_markersize()
    assert list(unigram.get_ydata()) == [6.1, 6.1] and "unigram" in unigram.get_label()
    assert fig.axes[0].get_legend().get_texts()[-1].get_text() == unigram.get_label()
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="at least one"):
        plots.training_loss_curves({})
    with pytest.raises(ValueError, match="no training rows"):
        plots.training_loss_curves({"x": [{"step": 1, "split": "eval", "loss": 1.0}]})


def test_token_log_prob_bars_labels_a_pll_as_a_pll():
    fig = plots.token_log_prob_bars(["the", "door"], [0.5, 0.25], pll=True)
    ax = fig.axes[0]
    assert "PLL" in ax.get_title() and "not ln p(sentence)" in ax.get_title()
    assert f"{np.log(0.5) + np.log(0.25):.2f}" in ax.get_title()
    assert "rest of the sentence" in ax.get_xlabel()
    assert [p.get_width() for p in ax.patches] == pytest.approx([-np.log(0.5), -np.log(0.25)])
    assert plots.figure_rule_violations(fig) == []
