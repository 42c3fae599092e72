"""plots for 08_ablations: one panel per metric, means with std error bars, the seeds as crosses."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from mlm_course import ablations, plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _rows():
    rows = []
    for k, variant in enumerate(ablations.variants(["rate"])):
        for seed in range(3):
            rows.append({"key": variant.key, "seed": seed, "heldout": {"loss": 6.0 + k + 0.1 * seed, "top1": 0.1},
                         "finetune": {"test_accuracy": 0.6 + 0.01 * seed}, "probe": {"test_accuracy": 0.55}})
    return rows


def test_ablation_panels_plot_means_stds_and_seeds():
    summary = ablations.summarise(_rows(), ablations.BUDGETS["quick"], ["rate"])
    fig = plots.ablation_panels(summary, "rate", title="rates")
    loss_ax, finetune_ax, probe_ax = fig.axes
    means = loss_ax.lines[0].get_xdata()  # the errorbar's markers: first variant at the top
    np.testing.assert_allclose(means, [6.1, 7.1, 8.1, 9.1])
    np.testing.assert_allclose(finetune_ax.lines[0].get_xdata(), [61.0] * 4)
    seeds = [line.get_xdata() for line in loss_ax.lines if line.get_marker() == "x"]
    np.testing.assert_allclose(seeds[0], [6.0, 6.1, 6.2])
    assert len(seeds) == 4
    assert [t.get_text() for t in loss_ax.get_yticklabels()] == ["15 %", "30 %", "40 %", "60 %"]
    assert "probe" in probe_ax.get_xlabel() and fig._suptitle.get_text() == "rates"


def test_ablation_panels_without_runs_is_a_clear_error():
    summary = ablations.summarise([], ablations.BUDGETS["quick"], ["rate"])
    with pytest.raises(ValueError, match="run the grid first"):
        plots.ablation_panels(summary, "rate")
