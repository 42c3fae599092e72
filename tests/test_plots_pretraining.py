"""plots for 06_pretraining: each returns a Figure with the right axes, labels and plotted data."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from mlm_course import plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _metrics(stages=(1,)):
    rows, step = [], 0
    for stage in stages:
        for _ in range(2):
            step += 10
            rows.append({"step": step, "split": "train", "loss": 7.0 - step / 10, "stage": stage})
        rows.append({"step": step, "split": "eval", "loss": 6.5 - step / 10, "top1": step / 100, "top5": step / 50,
                     "stage": stage})
    return rows


UNIGRAM, COPYING = {"loss": 6.7, "top1": 0.05, "top5": 0.17}, {"loss": 6.2, "top1": 0.15, "top5": 0.26}


def test_pretraining_curves_plot_train_and_heldout_loss_accuracy_and_the_baseline():
    fig = plots.pretraining_curves(_metrics(), baseline=UNIGRAM, title="this notebook's live run")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    loss, acc = fig.axes
    train, heldout = loss.lines[:2]
    np.testing.assert_allclose(train.get_xydata(), [[10, 6.0], [20, 5.0]])
    np.testing.assert_allclose(heldout.get_xydata(), [[20, 4.5]])
    assert heldout.get_marker() == "o" and heldout.get_zorder() > train.get_zorder()  # markers, on top
    assert heldout.get_color() != train.get_color()  # held-out has a colour of its own, not the training one
    assert [line.get_label() for line in acc.lines] == ["model top1", "model top5", "unigram top1", "unigram top5"]
    assert acc.lines[0].get_ydata().tolist() == [0.2] and acc.lines[0].get_color() != acc.lines[1].get_color()
    assert list(loss.lines[2].get_ydata()) == [6.7, 6.7]  # the unigram line
    assert [t.get_text() for t in loss.texts] == ["unigram (6.70)"]  # named beside it, not in a legend
    assert [t.get_text() for t in acc.texts] == ["unigram top1", "unigram top5"]
    legend = fig.legends[0]  # one legend, under the panels
    assert [t.get_text() for t in legend.texts] == ["training batches\n(mean per log interval)",
                                                    "held-out set\n(frozen masks)", "model top1", "model top5"]
    fig.draw_without_rendering()
    assert legend.get_window_extent().y1 < acc.get_window_extent().y0
    assert loss.get_title() == "this notebook's live run"
    assert acc.get_xlabel() == "optimiser step" and "nats" in loss.get_ylabel()
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []


def test_pretraining_curves_tell_the_two_baselines_apart_by_colour_style_and_name():
    fig = plots.pretraining_curves(_metrics(), baseline=UNIGRAM, copying=COPYING)
    loss, acc = fig.axes
    unigram, copying = loss.lines[2:]
    assert [unigram.get_label(), copying.get_label()] == ["unigram (6.70)", "unigram + copying (6.20)"]
    assert list(copying.get_ydata()) == [6.2, 6.2]
    assert unigram.get_color() != copying.get_color() and unigram.get_linestyle() != copying.get_linestyle()
    assert [line.get_ydata()[0] for line in acc.lines[4:]] == [0.15, 0.26]
    for ax in (loss, acc):  # each reference line named at its level, in its colour
        for line in ax.lines[2:]:
            named = [t for t in ax.texts if t.get_text().startswith(line.get_label().split(" (")[0])
                     and t.xy[1] == line.get_ydata()[0]]
            assert named and named[0].get_color() == line.get_color()
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []


def test_pretraining_curves_push_apart_the_names_of_close_baselines():
    close = {"loss": 6.2, "top1": 0.16, "top5": 0.26}  # copying top1 almost on unigram top5: names would overprint
    fig = plots.pretraining_curves(_metrics(), baseline=UNIGRAM, copying=close)
    assert plots.layout_problems(fig) == []


def test_pretraining_curves_keep_a_marker_at_zero_accuracy_whole():
    start = {"step": 0, "split": "eval", "loss": 9.0, "top1": 0.0, "top5": 0.0}  # the untrained model
    fig = plots.pretraining_curves([start, *_metrics()], baseline=UNIGRAM, copying=COPYING)
    assert fig.axes[1].get_ylim()[0] < 0 and plots.layout_problems(fig) == []


def test_pretraining_curves_mark_where_each_later_stage_starts():
    fig = plots.pretraining_curves(_metrics(stages=(1, 2, 3)))
    loss, acc = fig.axes
    for ax in (loss, acc):
        starts = [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == ":"]
        assert starts == [20, 40]
    assert [t.get_text() for t in loss.texts] == ["stage 2 (fresh warm-up)", "stage 3 (fresh warm-up)"]
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []


def test_pretraining_curves_of_the_shipped_checkpoint_leave_no_text_overlapping():
    from mlm_course import corpus
    from mlm_course.stored import read_metrics

    metrics = read_metrics(corpus.course_checkpoint_dir())
    fig = plots.pretraining_curves(metrics, baseline={"loss": 6.726, "top1": 0.052, "top5": 0.173},
                                   copying={"loss": 6.121, "top1": 0.145, "top5": 0.255}, title="the shipped checkpoint")
    loss, _ = fig.axes
    assert [t.get_text() for t in loss.texts][:2] == ["stage 2 (fresh warm-up)", "stage 3 (fresh warm-up)"]
    assert plots.figure_rule_violations(fig) == [] and plots.layout_problems(fig) == []


def test_fill_mask_bars_one_panel_per_sentence_accepted_answers_green():
    rows = [("She opened the [MASK].", [("door", 0.6), ("window", 0.3)], {"door"}),
            ("A [MASK] day.", [("cold", 0.5), ("long", 0.2)], {"warm"})]
    fig = plots.fill_mask_bars(rows, columns=3)
    assert len(fig.axes) == 3 and not fig.axes[2].axison  # the unused panel is switched off
    first = fig.axes[0]
    assert [t.get_text() for t in first.get_yticklabels()] == ["window", "door"]  # best guess on top
    assert [p.get_width() for p in first.patches] == [0.3, 0.6]
    green = plt.matplotlib.colors.to_rgba(plots.OKABE_ITO["bluish green"])
    assert [p.get_facecolor() == green for p in first.patches] == [False, True]
    assert not any(p.get_facecolor() == green for p in fig.axes[1].patches)
    assert first.get_title() == "She opened the [MASK]."
    assert first.get_xlabel() == "probability" and plots.figure_rule_violations(fig) == []
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["an accepted answer", "another guess"]
    long = "It was the happiest [MASK] of her life, said the king and the queen."
    fig = plots.fill_mask_bars([(long, [("day", 0.5)], {"day"})])
    assert fig.axes[0].get_title().replace("\n", " ") == long  # wrapped, not cut off
    assert plots.figure_rule_violations(fig) == []


def test_fill_mask_bars_table_one_line_per_sentence():
    rows = [("She opened the [MASK].", [("door", 0.6), ("window", 0.3)], {"door"}),
            ("A [MASK] day.", [("cold", 0.5), ("long", 0.2)], {"warm"})] * 10
    fig = plots.fill_mask_bars(rows, layout="table")
    ax = fig.axes[0]
    assert len(fig.axes) == 1
    assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["✓ She opened the [MASK].", "✗ A [MASK] day."]
    assert [t.get_text() for t in ax.texts[:2]] == ["door 60 %", "window 30 %"]
    green = plt.matplotlib.colors.to_rgba(plots.OKABE_ITO["bluish green"])
    assert [p.get_facecolor() == green for p in ax.patches[:4]] == [True, False, False, False]
    assert [p.get_width() for p in ax.patches[:2]] == pytest.approx([0.96 * 0.6, 0.96 * 0.3])
    assert "10 of 20" in ax.get_title() and fig.legends[0].get_texts()[0].get_text() == "an accepted answer"
    assert plots.figure_rule_violations(fig) == []
    assert int.from_bytes(plots.style.notebook_png(fig)[20:24], "big") <= 800
    with pytest.raises(ValueError, match="layout"):
        plots.fill_mask_bars(rows, layout="grid")


def test_accuracy_by_frequency_bars_model_beside_unigram():
    buckets = [{"bucket": "rare", "tokens": 10, "model_top1": 0.2, "unigram_top1": 0.0},
               {"bucket": "common", "tokens": 1000, "model_top1": 0.6, "unigram_top1": 0.3}]
    fig = plots.accuracy_by_frequency(buckets)
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [0.2, 0.6, 0.0, 0.3]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["rare\n(10 tokens)", "common\n(1,000 tokens)"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["model", "unigram frequencies"]
    assert "share of all training tokens" in ax.get_xlabel() and ax.get_ylim() == (0, 1)
    # 95 % Wilson interval of 2 right out of 10: (0.057, 0.510)
    low_caps = [line for line in ax.lines if line.get_ydata()[0] < 0.2 and len(line.get_xdata()) == 2]
    assert any(abs(line.get_ydata()[0] - 0.0567) < 1e-3 for line in low_caps)
    assert plots.figure_rule_violations(fig) == []
