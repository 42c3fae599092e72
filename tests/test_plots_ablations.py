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


def test_ablation_panels_plot_means_95_intervals_seeds_and_reference_lines():
    from scipy import stats

    summary = ablations.summarise(_rows(), 1, ["rate"])
    fig = plots.ablation_panels(summary, "rate", unigram_loss=6.74, title="rates")
    loss_ax, finetune_ax, probe_ax = fig.axes
    line = loss_ax.lines[0]  # rates are drawn along x: loss against rate, one connected line
    np.testing.assert_allclose(line.get_xdata(), [15, 30, 40, 60])
    np.testing.assert_allclose(line.get_ydata(), [6.1, 7.1, 8.1, 9.1])
    np.testing.assert_allclose(finetune_ax.lines[0].get_ydata(), [61.0] * 4)
    caps = loss_ax.containers[0].lines[2][0].get_segments()[0]  # the first error bar, bottom to top
    half = stats.t.ppf(0.975, 2) * 0.1 / np.sqrt(3)  # seeds 6.0, 6.1, 6.2: std 0.1, 3 seeds, t with 2 df
    np.testing.assert_allclose([caps[0][1], caps[1][1]], [6.1 - half, 6.1 + half])
    seeds = [ln.get_ydata() for ln in loss_ax.lines if ln.get_marker() == "x" and len(ln.get_ydata())]
    np.testing.assert_allclose(seeds[0], [6.0, 6.1, 6.2])
    assert len(seeds) == 4
    references = {ln.get_label(): ln.get_ydata()[0] for ax in fig.axes for ln in ax.lines if ln.get_linestyle() != "-"
                  and ln.get_marker() in ("None", "", None)}
    assert references == {"unigram frequencies (6.74 nats)": 6.74, "chance (50 %)": 50.0}
    assert "probe" in probe_ax.get_ylabel() and "rate" in loss_ax.get_xlabel() and fig._suptitle.get_text() == "rates"
    assert plots.figure_rule_violations(fig) == []


def test_ablation_panels_rows_for_the_other_families_with_chance_drawn():
    rows = [dict(r, key=v.key) for r, v in zip(_rows(), ablations.variants(["mix"]), strict=False)]
    summary = ablations.summarise(rows, 1, ["mix"])
    fig = plots.ablation_panels(summary, "mix", chance_accuracy=0.5)
    loss_ax, finetune_ax, _ = fig.axes
    assert [t.get_text() for t in loss_ax.get_yticklabels()][:2] == ["80/10/10", "100/0/0"]
    np.testing.assert_allclose(loss_ax.lines[0].get_xdata()[:2], [6.0, 6.1])  # one seed each: means = values
    chance = [ln for ln in finetune_ax.lines if ln.get_label() == "chance (50 %)"]
    assert len(chance) == 1 and list(chance[0].get_xdata()) == [50.0, 50.0]
    assert not [ln for ln in loss_ax.lines if "unigram" in ln.get_label()], "no unigram level given, none drawn"
    assert plots.figure_rule_violations(fig) == []


def test_ablation_loss_by_action_dots_per_variant_and_group():
    split = {name: {"loss": loss, "tokens": n, "loss_ci95": 0.05}
             for name, loss, n in (("[MASK]", 6.0, 80), ("random token", 7.0, 10), ("unchanged", 3.0, 10),
                                   ("all", 5.9, 100))}
    other = {name: dict(row, loss=row["loss"] + 1) for name, row in split.items()}
    fig = plots.ablation_loss_by_action({"80/10/10": split, "100/0/0": other}, unigram_loss=6.7)
    ax = fig.axes[0]
    first, second = ax.containers
    np.testing.assert_allclose(np.asarray(first.lines[0].get_ydata(), float), [6.0, 7.0, 3.0, 5.9])
    np.testing.assert_allclose(np.asarray(second.lines[0].get_ydata(), float), [7.0, 8.0, 4.0, 6.9])
    assert (np.asarray(second.lines[0].get_xdata()) > np.asarray(first.lines[0].get_xdata())).all()  # side by side within a group
    assert "(10 positions)" in ax.get_xticklabels()[2].get_text() and "true token" in ax.get_xticklabels()[2].get_text()
    assert [t.get_text() for t in ax.get_legend().texts] == ["unigram frequencies (6.70)", "80/10/10", "100/0/0"]
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="at least one variant"):
        plots.ablation_loss_by_action({})


def test_ablation_panels_without_runs_is_a_clear_error():
    summary = ablations.summarise([], 1, ["rate"])
    with pytest.raises(ValueError, match="run the grid first"):
        plots.ablation_panels(summary, "rate")
