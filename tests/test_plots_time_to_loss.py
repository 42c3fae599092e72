"""plots.time_to_loss_curves: benchmarks/results/time_to_loss.json drawn as held-out loss against CPU-seconds."""

import math

import matplotlib
import pytest

matplotlib.use("Agg")

from mlm_course import plots  # noqa: E402
from mlm_course.plots.style import OKABE_ITO  # noqa: E402

UNIGRAM = 6.73


def curve(floor: float, rate: float, seconds: float = 1800.0) -> list[dict]:
    """An untrained point at 0 s (9.01 nats), then evaluations every 30 s decaying towards ``floor``."""
    points = [{"cpu_seconds": 0.0, "step": 0, "loss": 9.01}]
    for index, t in enumerate(range(30, int(seconds) + 1, 30), start=1):
        points.append({"cpu_seconds": float(t), "step": index * 10, "loss": floor + (9.0 - floor) * math.exp(-rate * t)})
    return points


@pytest.fixture
def document() -> dict:
    runs = {"course": curve(4.5, 0.004), "transformers_tuned": curve(6.0, 0.003),
            "transformers_defaults": curve(7.3, 0.002), "transformers_in_course_loop": curve(6.0, 0.0032),
            "course_full_logits": curve(5.0, 0.0025, 900), "course_dropout": curve(4.8, 0.0035, 600)}
    return {"runs": {name: {"curve": points} for name, points in runs.items()} | {"throughput": {"tokens": 1}},
            "targets": [{"loss": 7.5, "source": "(b)'s best"}, {"loss": 6.05, "source": "(c)'s best"}],
            "unigram_baseline": {"loss": UNIGRAM}}


def test_one_line_per_run_in_its_panel_with_the_runs_own_points(document):
    fig = plots.time_to_loss_curves(document)
    left, right = fig.axes
    drawn = {ax: {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
             for ax in (left, right)}
    assert set(drawn[left]) == {plots.TIME_TO_LOSS_RECIPES[n][0] for n in
                                ("course", "transformers_tuned", "transformers_defaults", "transformers_in_course_loop")}
    assert set(drawn[right]) == {plots.TIME_TO_LOSS_ABLATIONS[n][0] for n in
                                 ("course", "course_full_logits", "course_dropout")}
    course = drawn[left]["(a) the course's recipe"]
    points = document["runs"]["course"]["curve"][1:]  # 0 s has no place on a log axis
    assert list(course.get_xdata()) == [p["cpu_seconds"] for p in points]
    assert list(course.get_ydata()) == [p["loss"] for p in points]
    assert course.get_color() == OKABE_ITO["blue"] == drawn[right]["(a) the course's recipe"].get_color()
    assert list(drawn[right]["dropout 0.1"].get_xdata())[-1] == 600.0  # a run that stopped early ends there
    assert plots.figure_rule_violations(fig) == []
    plt_close(fig)


def test_targets_and_the_unigram_line_are_drawn_in_both_panels_and_named(document):
    fig = plots.time_to_loss_curves(document)
    panels = fig.axes[:2]
    for ax in panels:
        levels = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_label().startswith("_"))
        assert levels == [6.05, UNIGRAM, 7.5]
        assert f"unigram frequencies {UNIGRAM:.2f}" in {text.get_text() for text in ax.texts}
        assert ax.get_xscale() == "log" and "CPU-seconds" in ax.get_xlabel()
    named = {tick.get_text() for tick in fig.axes[1].child_axes[0].get_yticklabels()}  # its second y axis
    assert named == {"target 7.50", "target 6.05"}
    assert "loss (nats)" in fig.axes[0].get_ylabel()
    assert plots.figure_rule_violations(fig) == []
    plt_close(fig)


def test_the_figure_obeys_the_course_rules(document):
    fig = plots.time_to_loss_curves(document)
    assert plots.figure_rule_violations(fig) == []
    low, high = fig.axes[0].get_ylim()
    assert low < 4.5 and high > 9.0  # every curve's range is visible
    plt_close(fig)


def plt_close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---- plots.lunch_break_curves: benchmarks/results/lunch_break.json ---------------------------------------------------


@pytest.fixture
def lunch_document() -> dict:
    def run(floor: float, rate: float, seconds: float = 1800.0) -> dict:
        return {"curve": curve(floor, rate, seconds), "budget_cpu_seconds": seconds}

    return {"groups": {"before": {"runs": {"lunch": run(4.2, 0.004), "course": run(4.5, 0.004)}},
                       "transformers": {"runs": {"lunch": run(4.25, 0.004), "transformers_tuned": run(6.0, 0.003),
                                                 "transformers_defaults": run(7.3, 0.002, 300)}}},
            "unigram_baseline": {"loss": UNIGRAM}, "checkpoint_loss": 3.48}


def test_the_lunch_break_figure_draws_each_run_in_minutes_with_the_checkpoint_and_unigram_lines(lunch_document):
    fig = plots.lunch_break_curves(lunch_document)
    (ax,) = fig.axes
    drawn = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(drawn) == {label for label, _, _ in plots.pretraining.LUNCH_BREAK_RUNS.values()}
    lunch = drawn["the same, its schedule fitted to 30 minutes"]
    points = lunch_document["groups"]["before"]["runs"]["lunch"]["curve"][1:]
    assert list(lunch.get_xdata()) == [p["cpu_seconds"] / 60 for p in points]
    assert list(lunch.get_ydata()) == [p["loss"] for p in points]
    # the same recipe's second run (the other comparison) has the same colour, another line style
    second = drawn["the same, fitted: its second run"]
    assert second.get_color() == lunch.get_color() == OKABE_ITO["sky blue"] and second.get_linestyle() != "-"
    assert drawn["the checkpoint's recipe (its first stage)"].get_color() == OKABE_ITO["blue"]
    assert max(drawn["(b) Trainer at its defaults"].get_xdata()) == 5.0  # (b)'s shorter budget ends there
    levels = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_label().startswith("_"))
    assert levels == [3.48, UNIGRAM]
    assert {"the shipped checkpoint 3.48", f"unigram frequencies {UNIGRAM:.2f}"} <= {t.get_text() for t in ax.texts}
    assert ax.get_xlim() == (0, 30) and "30 CPU-minutes" in ax.get_title()
    assert plots.figure_rule_violations(fig) == []
    plt_close(fig)
