"""Label-efficiency grid: balanced subsets, the recipe's step floor, resumable grids, intervals over seeds."""

import json
import math

import pytest

from mlm_course import label_efficiency as le


def test_word_order_subsets_keep_real_and_corrupted_copies_together():
    labels = le.task_splits("word_order")["train"][1]
    keep = le.balanced_subset("word_order", labels, 100, seed=3)
    assert len(keep) == 100 and sum(labels[i] for i in keep) == 50
    assert all(keep[i] % 2 == 0 and keep[i + 1] == keep[i] + 1 for i in range(0, 100, 2))
    assert keep == le.balanced_subset("word_order", labels, 100, seed=3) != le.balanced_subset(
        "word_order", labels, 100, seed=4)


def test_sentiment_subsets_are_half_of_each_class():
    labels = le.task_splits("sentiment")["train"][1]
    keep = le.balanced_subset("sentiment", labels, 50, seed=0)
    assert len(set(keep)) == 50 and sum(labels[i] for i in keep) == 25
    assert le.balanced_subset("sentiment", labels, None, seed=0) == list(range(len(labels)))


@pytest.mark.parametrize("bad", [1, 51, 0])
def test_odd_or_tiny_budgets_are_refused(bad):
    with pytest.raises(ValueError, match="even number"):
        le.balanced_subset("sentiment", [0, 1] * 100, bad, seed=0)


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="task="):
        le.task_splits("nli")


def test_small_budgets_still_get_the_minimum_number_of_steps():
    small = le.recipe(50, 5e-4, 0)  # 4 batches of 16 per epoch
    assert small.batch_size == 16 and small.epochs * math.ceil(50 / 16) >= le.MIN_STEPS
    large = le.recipe(16000, 5e-4, 0)  # 500 batches of 32: two epochs are already enough
    assert large.batch_size == 32 and large.epochs == 2 and large.eval_every == 1000 // 10


def test_bag_of_words_is_exactly_at_chance_on_word_order():
    """Both versions of a test sentence have the same words, so any bag of words gives them the same label."""
    row = le.run_one("word_order", "bow", 300, seed=0)
    assert row["test_accuracy"] == 0.5 and row["n_train"] == 300


def test_the_grid_resumes_without_rerunning_finished_rows(tmp_path, monkeypatch):
    calls = []

    def fake(task, model, budget, seed, **_):
        calls.append((task, model, budget, seed))
        return {"task": task, "model": model, "budget": budget, "seed": seed, "test_accuracy": 0.5,
                "collapsed": False, "seconds": 0, "n_train": budget}

    monkeypatch.setattr(le, "run_one", fake)
    path = tmp_path / "grid.json"
    grid = {"tasks": ("word_order",), "models": ("bow",), "budgets": (50, 100), "log": lambda *_: None}
    le.run_grid(path, seeds=(0,), **grid)
    le.run_grid(path, seeds=(0, 1), **grid)
    assert calls == [("word_order", "bow", 50, 0), ("word_order", "bow", 100, 0),
                     ("word_order", "bow", 50, 1), ("word_order", "bow", 100, 1)]
    assert len(json.loads(path.read_text())["rows"]) == 4


def test_summary_is_the_t_interval_over_seeds():
    rows = [{"task": "t", "model": "m", "budget": 50, "n_train": 50, "seed": s, "test_accuracy": a,
             "collapsed": a == 0.5} for s, a in enumerate([0.6, 0.7, 0.5])]
    (entry,) = le.summarise(rows, "t")["m"]
    # mean 0.6, sample sd 0.1, se 0.1/√3, t(0.975, 2 df) = 4.3027
    assert entry["mean"] == pytest.approx(0.6)
    assert entry["se"] == pytest.approx(0.1 / math.sqrt(3))
    assert entry["high"] - entry["mean"] == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-5)
    assert entry["collapsed"] == 1 and entry["runs"] == 3


def test_collapse_counts_are_per_recipe_and_leave_out_bag_of_words():
    rows = [{"model": "random", "recipe": "before", "collapsed": True},
            {"model": "course", "recipe": "before", "collapsed": False},
            {"model": "random", "recipe": "balanced", "collapsed": False},
            {"model": "bow", "recipe": "balanced", "collapsed": True}]
    assert le.collapse_counts(rows) == {"before": {"collapsed": 1, "runs": 2}, "balanced": {"collapsed": 0, "runs": 1}}
