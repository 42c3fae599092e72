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


def test_confusion_matrix_plot_rejects_a_wrong_shape():
    with pytest.raises(ValueError, match="square confusion matrix"):
        plots.confusion_matrix_plot([[1, 2, 3], [4, 5, 6]])


def test_finetune_curves_plot_train_and_dev_and_mark_the_best():
    metrics = [
        {"step": 10, "split": "train", "loss": 0.7}, {"step": 20, "split": "train", "loss": 0.5},
        {"step": 20, "split": "dev", "loss": 0.55, "accuracy": 0.7},
        {"step": 30, "split": "train", "loss": 0.4}, {"step": 30, "split": "dev", "loss": 0.6, "accuracy": 0.8},
    ]
    fig = plots.finetune_curves(metrics)
    left, right = fig.axes
    assert list(left.lines[0].get_xdata()) == [10, 20, 30] and list(left.lines[0].get_ydata()) == [0.7, 0.5, 0.4]
    assert list(left.lines[1].get_ydata()) == [0.55, 0.6]
    assert list(right.lines[0].get_ydata()) == [0.7, 0.8]
    assert list(right.lines[1].get_xdata()) == [30] and "best: 80.0% at step 30" in right.get_legend().texts[0].get_text()
    assert right.get_ylabel() == "dev accuracy"


def test_finetune_curves_needs_training_rows():
    with pytest.raises(ValueError, match="no training rows"):
        plots.finetune_curves([{"step": 1, "split": "dev", "loss": 1.0, "accuracy": 0.5}])


def test_comparison_bars_plot_values_and_mark_rows_not_run():
    rows = [{"label": "bag of words", "accuracy": 0.79, "f1": 0.80},
            {"label": "MiniLM", "accuracy": 0.86, "f1": 0.85},
            {"label": "bert-base", "accuracy": None, "f1": None}]
    fig = plots.comparison_bars(rows)
    ax = fig.axes[0]
    acc, f1 = ax.containers
    assert [round(p.get_width(), 2) for p in acc] == [0.79, 0.86]
    assert [round(p.get_width(), 2) for p in f1] == [0.80, 0.85]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["bag of words", "MiniLM", "bert-base"]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("not run") == 2 and "86.0%" in texts
    with pytest.raises(ValueError, match="no rows"):
        plots.comparison_bars([])
