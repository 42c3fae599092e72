"""plots for 07_fine_tuning: each returns a Figure with the right axes, labels and plotted data."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from mlm_course import plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_confusion_matrix_plot_shows_counts_shares_and_labels():
    fig = plots.confusion_matrix_plot([[40, 10], [5, 45]])
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), [[0.8, 0.2], [0.1, 0.9]])
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["40\n(80%)", "10\n(20%)", "5\n(10%)", "45\n(90%)"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["negative", "positive"]
    assert ax.get_xlabel() == "predicted" and ax.get_ylabel() == "true"
    assert ax.get_title() == "accuracy 85.0%"
    assert plots.figure_rule_violations(fig) == []


def test_confusion_matrix_plot_rejects_a_wrong_shape():
    with pytest.raises(ValueError, match="square confusion matrix"):
        plots.confusion_matrix_plot([[1, 2, 3], [4, 5, 6]])


def _finetune_metrics():
    return [
        {"step": 10, "split": "train", "loss": 0.7}, {"step": 20, "split": "train", "loss": 0.5},
        {"step": 20, "split": "dev", "loss": 0.55, "accuracy": 0.7},
        {"step": 30, "split": "train", "loss": 0.4}, {"step": 30, "split": "dev", "loss": 0.6, "accuracy": 0.8},
    ]


def test_finetune_curves_plot_train_and_dev_and_mark_the_best():
    fig = plots.finetune_curves(_finetune_metrics())
    left, right = fig.axes
    assert list(left.lines[0].get_xdata()) == [10, 20, 30] and list(left.lines[0].get_ydata()) == [0.7, 0.5, 0.4]
    assert list(left.lines[1].get_ydata()) == [0.55, 0.6]
    assert list(right.lines[0].get_ydata()) == [0.7, 0.8]
    legend = [t.get_text() for t in fig.legends[0].texts]  # one legend under the panels says what each point is
    assert list(right.lines[1].get_xdata()) == [30] and "best: 80.0% at step 30" in legend
    assert legend[:2] == ["train: mean loss of the steps since the previous point",
                          "dev: loss and accuracy at an evaluation"]
    assert right.get_ylabel() == "dev accuracy"
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []


def test_finetune_curves_mark_every_point_and_keep_the_best_star_inside_the_axes():
    fig = plots.finetune_curves(_finetune_metrics())
    for ax in fig.axes:
        for line in ax.lines:  # every plotted point is a marker, the training points included
            assert line.get_marker() not in ("None", "", None)
    right = fig.axes[1]
    low, high = right.get_ylim()
    best = right.lines[1].get_ydata()[0]
    assert low < 0.7 and high - best >= 0.01  # the star at the top has room above it
    assert plots.layout_problems(fig) == []  # no marker cut by the frame


def test_finetune_curves_needs_training_rows():
    with pytest.raises(ValueError, match="no training rows"):
        plots.finetune_curves([{"step": 1, "split": "dev", "loss": 1.0, "accuracy": 0.5}])


def test_comparison_dots_show_wilson_intervals_from_chance_and_rows_not_run():
    from mlm_course.statistics import wilson_interval

    rows = [{"label": "bag of words", "accuracy": 0.794, "examples": 1057},
            {"label": "MiniLM", "accuracy": 0.837, "examples": 1057},
            {"label": "bert-base", "accuracy": None}]
    fig = plots.comparison_dots(rows)
    ax = fig.axes[0]
    dots = [c.lines[0] for c in ax.containers]
    assert [round(float(d.get_xdata()[0]), 3) for d in dots] == [0.794, 0.837]
    low, high = ax.containers[0].lines[2][0].get_segments()[0][:, 0]
    assert (low, high) == pytest.approx(wilson_interval(839, 1057, 0.95))  # 0.794 × 1057 ≈ 839 right
    assert high - low == pytest.approx(2 * 1.96 * np.sqrt(0.794 * 0.206 / 1057), rel=0.03)  # ≈ ±2.4 points
    assert ax.get_xlim()[0] == pytest.approx(0.48) and ax.get_xlim()[1] == 1.0
    chance = [ln for ln in ax.lines if ln.get_label() == "chance (50%)"]
    assert len(chance) == 1 and list(chance[0].get_xdata()) == [0.5, 0.5]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["bag of words", "MiniLM", "bert-base"]
    not_run = [t for t in ax.texts if t.get_text() == "not run"]
    assert len(not_run) == 1 and not_run[0].get_position()[0] > 0.5  # inside the axes, clear of the tick labels
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="no rows"):
        plots.comparison_dots([])
    with pytest.raises(ValueError, match="number of test sentences"):
        plots.comparison_dots([{"label": "x", "accuracy": 0.8}])


def test_label_efficiency_curves_draw_one_line_per_model_with_intervals():
    from mlm_course import label_efficiency, plots

    rows = [{"task": "t", "model": m, "budget": b, "n_train": b or 2000, "seed": s, "collapsed": False,
             "test_accuracy": 0.5 + (0.1 if m == "course" else 0.0) + 0.01 * s}
            for m in ("random", "course") for b in (50, 1000, None) for s in range(3)]
    summary = label_efficiency.summarise(rows, "t")
    fig = plots.label_efficiency_curves(summary, zero_shot={"course": {"accuracy": 0.9, "low": 0.88, "high": 0.92}},
                                        title="word order")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlim()[1] > 2000
    assert [t.get_text() for t in ax.get_xticklabels()] == ["50", "1,000", "2,000"]  # the budgets, as numbers
    lines = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert sorted(len(line.get_xdata()) for line in lines) == [3, 3]  # one line of three budgets per model
    assert any("zero-shot" in text.get_text() and "90.0%" in text.get_text() for text in ax.texts)
    fig.draw_without_rendering()
    assert fig.legends[0].get_window_extent().y1 < ax.get_window_extent().y0  # the legend under the axes
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []
    with pytest.raises(ValueError, match="nothing to plot"):
        plots.label_efficiency_curves({})


def test_label_efficiency_curves_stack_the_collapse_counts_of_models_at_one_budget():
    from mlm_course import label_efficiency

    budgets = (50, 100, 300, 1000, None)
    rows = [{"task": "t", "model": m, "budget": b, "n_train": b or 2180, "seed": s,
             "collapsed": m != "course" and s <= (0 if m == "random" else 2), "test_accuracy": 0.5 + 0.002 * s}
            for m in ("random", "course", "bow") for b in budgets for s in range(3)]
    fig = plots.label_efficiency_curves(label_efficiency.summarise(rows, "t"), title="word order")
    ax = fig.axes[0]
    notes = [t.get_text() for t in ax.texts]
    assert notes.count("1/3 collapsed") == 5 and notes.count("3/3 collapsed") == 5  # random's and bow's, each budget
    assert plots.layout_problems(fig) == []  # stacked: none overprints another, all inside the axes


def test_zero_shot_word_order_shows_accuracies_from_chance_and_paired_differences():
    table = {"heldout": {"course": {"accuracy": 0.96, "low": 0.93, "high": 0.98},
                         "bigram": {"accuracy": 0.90, "low": 0.86, "high": 0.93}}}
    comparisons = [{"domain": "heldout", "scorer": "bigram", "mean_difference": 0.06, "low": 0.02, "high": 0.10,
                    "detected": True}]
    fig = plots.zero_shot_word_order(table, comparisons)
    left, right = fig.axes
    assert [t.get_text() for t in left.get_yticklabels()] == ["course checkpoint (PLL), held-out corpus",
                                                              "word bigrams (counts), held-out corpus"]
    points = [line.get_xdata()[0] for line in left.lines if line.get_marker() == "o"]
    assert points == [pytest.approx(96), pytest.approx(90)]
    difference = [line for line in right.lines if line.get_marker() == "o" and len(line.get_xdata())][0]
    assert difference.get_xdata()[0] == pytest.approx(6) and difference.get_markerfacecolor() != "white"
    assert [t.get_text() for t in fig.legends[0].texts] == [
        "chance (50%)", "no difference", "filled: McNemar, after Holm, p < 0.05", "hollow: not detected"]
    assert left.get_legend() is None and right.get_legend() is None  # one legend, under the panels
    assert [t.get_text() for t in right.texts] == ["+6.0"]  # the difference written by its point
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []


def test_label_efficiency_differences_show_each_budget_and_the_comparisons_one_test():
    by_budget = [{"n_train": n, "mean_difference": d, "low": d - 0.03, "high": d + 0.03} for n, d in ((50, 0.01),
                                                                                                   (2180, 0.11))]
    comparisons = [{"model": "course", "baseline": "random", "runs": 15, "ahead": 14, "adjusted_p": 0.004,
                    "detected": True, "by_budget": by_budget}]
    fig = plots.label_efficiency_differences(comparisons, title="word order")
    ax = fig.axes[0]
    line = next(line for line in ax.lines if line.get_marker() == "o")
    assert list(line.get_ydata()) == [pytest.approx(1), pytest.approx(11)]
    assert line.get_markerfacecolor() != "white"
    labels = [t.get_text() for t in fig.legends[0].texts]
    assert "course − random: ahead in 14 of 15 runs, p = 0.004 after Holm (a difference)" in labels
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []
    long_title = "Movie-review sentiment, test set of 1,057 sentences: each model against a baseline, paired runs"
    fig = plots.label_efficiency_differences(comparisons, title=long_title)
    assert plots.layout_problems(fig) == []  # the title clear of the y label
    with pytest.raises(ValueError, match="nothing to plot"):
        plots.label_efficiency_differences([])
