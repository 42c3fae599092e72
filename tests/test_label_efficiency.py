"""Label efficiency: balanced subsets, summaries over seeds (mlm_course.label_efficiency), and the runs of the grid
(mlm_course.lab.label_grid): the recipe's step floor, one run per (task, model, labels, seed), resumable grids."""

import json
import math

import pytest

from mlm_course import label_efficiency as le
from mlm_course import word_order
from mlm_course.lab import label_grid


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
    small = label_grid.recipe(50, 5e-4, 0)  # 4 batches of 16 per epoch
    assert small.batch_size == 16 and small.epochs * math.ceil(50 / 16) >= label_grid.MIN_STEPS
    assert small.epochs == math.ceil(600 / 4) and small.precision == "fp32" and small.patience is None
    large = label_grid.recipe(16000, 5e-4, 0)  # 500 batches of 32: two epochs are already enough
    assert large.batch_size == 32 and large.epochs == 2 and large.eval_every == 1000 // 10


def test_the_first_recipe_is_batch_32_with_dev_twice_an_epoch_and_patience():
    before = label_grid.old_recipe(1000, 1e-4, 2, steps=20)  # ceil(1000 / 32) = 32 batches per epoch
    assert (before.batch_size, before.eval_every, before.patience, before.epochs) == (32, 16, 3, 2)
    assert (before.lr, before.seed, before.steps, before.precision) == (1e-4, 2, 20, "fp32")
    assert set(label_grid.MODELS) == {"random", "course", "minilm"}


def test_bag_of_words_is_exactly_at_chance_on_word_order():
    """Both versions of a test sentence have the same words, so any bag of words gives them the same label."""
    row = label_grid.run_task("word_order", "bow", 300, seed=0)
    assert row["test_accuracy"] == 0.5 and row["n_train"] == 300


def test_the_grid_resumes_without_rerunning_finished_rows(tmp_path, monkeypatch):
    calls = []

    def fake(task, model, budget, seed, **_):
        calls.append((task, model, budget, seed))
        return {"task": task, "model": model, "budget": budget, "seed": seed, "test_accuracy": 0.5,
                "collapsed": False, "seconds": 0, "n_train": budget}

    monkeypatch.setattr(label_grid, "run_task", fake)
    path = tmp_path / "grid.json"
    grid = {"tasks": ("word_order",), "models": ("bow",), "budgets": (50, 100), "log": lambda *_: None}
    label_grid.run_grid(path, seeds=(0,), **grid)
    label_grid.run_grid(path, seeds=(0, 1), **grid)
    assert calls == [("word_order", "bow", 50, 0), ("word_order", "bow", 100, 0),
                     ("word_order", "bow", 50, 1), ("word_order", "bow", 100, 1)]
    assert len(json.loads(path.read_text())["rows"]) == 4


def test_a_run_collapses_when_one_class_holds_95_percent_of_its_predictions():
    assert le.collapse([1] * 19 + [0]) == (0.95, True)
    assert le.collapse([0] * 19 + [1]) == (0.05, True)
    assert le.collapse([1] * 18 + [0] * 2) == (0.9, False)
    with pytest.raises(ValueError, match="no predictions"):
        le.collapse([])


def test_summary_is_the_t_interval_over_seeds():
    rows = [{"task": "t", "model": "m", "budget": 50, "n_train": 50, "seed": s, "test_accuracy": a,
             "collapsed": a == 0.5} for s, a in enumerate([0.6, 0.7, 0.5])]
    (entry,) = le.summarise(rows, "t")["m"]
    # mean 0.6, sample sd 0.1, se 0.1/√3, t(0.975, 2 df) = 4.3027
    assert entry["mean"] == pytest.approx(0.6)
    assert entry["se"] == pytest.approx(0.1 / math.sqrt(3))
    assert entry["high"] - entry["mean"] == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-5)
    assert entry["collapsed"] == 1 and entry["runs"] == 3


def test_summary_and_differences_list_budgets_fewest_labels_first_whatever_order_the_grids_ran_in():
    """A grid merged in later (MiniLM at 100 and all labels) used to print its budgets after the others."""
    def run(model, budget, n_train, seed, accuracy):
        return {"task": "t", "model": model, "budget": budget, "n_train": n_train, "seed": seed,
                "test_accuracy": accuracy, "collapsed": False}

    rows = [run(m, b, n, s, 0.5 + n / 10_000 + s / 100) for m in ("a", "b")
            for b, n in ((300, 300), (None, 2180), (50, 50)) for s in (0, 1)]
    rows += [run("a", 100, 100, s, 0.6) for s in (0, 1)]
    assert [e["budget"] for e in le.summarise(rows, "t")["a"]] == [50, 100, 300, None]
    assert list(le.differences(rows, "t", "a", "b")) == [50, 300, None]  # only budgets both ran


def test_collapse_counts_are_per_recipe_and_leave_out_bag_of_words():
    rows = [{"model": "random", "recipe": "before", "collapsed": True},
            {"model": "course", "recipe": "before", "collapsed": False},
            {"model": "random", "recipe": "balanced", "collapsed": False},
            {"model": "bow", "recipe": "balanced", "collapsed": True}]
    assert le.collapse_counts(rows) == {"before": {"collapsed": 1, "runs": 2}, "balanced": {"collapsed": 0, "runs": 1}}


def _row(model="course", budget=50, seed=0, recipe="balanced"):
    return {"task": "word_order", "model": model, "budget": budget, "seed": seed, "recipe": recipe}


def test_merge_keeps_every_row_command_and_the_zero_shot_table_once():
    a = {"rows": [_row(seed=0)], "commands": ["grid a"], "zero_shot": {"course": {"accuracy": 0.96}}, "quick": False}
    b = {"rows": [_row(seed=1), _row(seed=1, recipe="before")], "commands": ["grid b"]}
    merged = label_grid.merge_results([a, b])
    assert [(r["seed"], r["recipe"]) for r in merged["rows"]] == [(0, "balanced"), (1, "balanced"), (1, "before")]
    assert merged["commands"] == ["grid a", "grid b"]
    assert merged["zero_shot"] == {"course": {"accuracy": 0.96}} and merged["quick"] is False
    with pytest.raises(ValueError, match="appears in two result files"):
        label_grid.merge_results([a, {"rows": [_row(seed=0)]}])


def test_describe_run_reads_a_pretraining_folder(tmp_path):
    """What mlm-course pretrain writes to results.json (lab/pretrain_run.py): the run's figures and its settings,
    without the parameter counts and the model's size name."""
    written = {"config": "small", "parameters": {"total": 1}, "steps": 1000, "tokens_seen": 4_096_000, "processes": 1,
               "seconds": 429.0, "heldout": {"loss": 4.12}, "unigram_baseline": {"loss": 6.7},
               "settings": {"lr": 5e-4, "mask_rate": 0.15}, "machine": {"device": "cpu"}}
    (tmp_path / "results.json").write_text(json.dumps(written))
    described = label_grid.describe_run(tmp_path)
    assert described == {"folder": str(tmp_path), "steps": 1000, "tokens_seen": 4_096_000, "seconds": 429.0,
                         "heldout": {"loss": 4.12}, "unigram_baseline": {"loss": 6.7},
                         "settings": {"lr": 5e-4, "mask_rate": 0.15}, "machine": {"device": "cpu"}}


def test_review_loss_of_the_course_checkpoint_is_far_below_chance_on_review_text():
    scores = label_grid.review_masked_lm_loss("course")
    assert scores["loss"] < math.log(8192) - 3  # chance: ln(vocabulary size) = 9.01 nats
    assert 0 < scores["top1"] <= scores["top5"] < 1
    from mlm_course import corpus, pretraining, tokenization

    blocks = pretraining.pack_blocks(corpus.sentiment("dev").texts, tokenization.course_tokenizer(), 128)
    content = blocks.numel() - 2 * len(blocks)  # [CLS] and [SEP] are never masked
    bound = 4 * math.sqrt(content * 0.15 * 0.85)  # Bernoulli(0.15) count: 4 standard deviations
    assert abs(scores["tokens"] - 0.15 * content) < bound


def test_summary_table_shows_mean_half_width_and_collapses_per_budget():
    rows = [{"task": "t", "model": "m", "budget": b, "n_train": n, "seed": s, "test_accuracy": a,
             "collapsed": a == 0.5} for b, n in ((50, 50), (None, 2180)) for s, a in enumerate([0.6, 0.7, 0.5])]
    table = le.summary_table(le.summarise(rows, "t")).splitlines()
    assert table[0].split() == ["model", "50", "all", "2,180"]
    half = 4.302653 * 0.1 / math.sqrt(3) * 100  # t(0.975, 2) × se, in points
    assert table[1].split() == ["m", "60.0%", f"±{half:.1f}", "*1", "60.0%", f"±{half:.1f}", "*1"]


def test_collapse_table_counts_per_recipe_task_and_model_with_the_steps_taken():
    rows = [{"task": "sentiment", "model": "random", "recipe": "before", "collapsed": c, "steps": s, "dev_accuracy": d}
            for c, s, d in ((True, 4, 0.5), (True, 8, 0.5125), (False, 64, 0.6))]
    rows.append({"task": "sentiment", "model": "bow", "recipe": "before", "collapsed": True, "steps": 0})
    lines = le.collapse_table(rows).splitlines()
    assert len(lines) == 2
    assert lines[1].split() == ["before", "sentiment", "random", "2", "of", "3", "4–8", "50.0%–51.2%"]


def test_the_pll_probe_is_a_logistic_regression_on_the_features_and_only_for_word_order(monkeypatch):
    from mlm_course import word_order

    splits = [word_order.split(name) for name in word_order.SPLITS]
    texts = {t: y for d in splits for t, y in zip(d.texts, d.labels, strict=True)}
    # stand-in features: the label itself sits in the lowest-log-prob column, the others are noise
    table = {t: [(len(t) % 7) / 7, -5.0 + 4 * y, -1.0] for t, y in texts.items()}
    monkeypatch.setattr(label_grid, "_pll_table", lambda: table)
    row = label_grid.run_task("word_order", le.PLL_PROBE, 50, seed=0, quick=True)
    assert row["test_accuracy"] == 1.0 and row["n_train"] == 50 and not row["collapsed"]
    assert le.collapse_counts([row]) == {}  # a linear row is never counted as a collapsed fine-tuning run
    with pytest.raises(ValueError, match="word_order only"):
        label_grid.run_task("sentiment", le.PLL_PROBE, 50, seed=0, quick=True)


def test_differences_are_paired_over_the_seeds_both_models_ran():
    from scipy import stats

    rows = [{"task": "t", "model": m, "budget": 50, "n_train": 50, "seed": s, "test_accuracy": a, "collapsed": False}
            for m, accs in (("course", (0.6, 0.7, 0.5, 0.8)), ("random", (0.5, 0.5, 0.53))) for s, a in enumerate(accs)]
    rows.append({"task": "t", "model": "course", "budget": 100, "n_train": 100, "seed": 0, "test_accuracy": 0.9,
                 "collapsed": False})  # a budget the baseline lacks is left out, and so is course's seed 3
    (budget, result), = le.differences(rows, "t", "course", "random").items()
    expected = stats.ttest_rel([0.6, 0.7, 0.5], [0.5, 0.5, 0.53])
    assert budget == 50 and result["n"] == 3 and result["mean_difference"] == pytest.approx(0.09)
    assert result["p"] == pytest.approx(expected.pvalue) and result["t"] == pytest.approx(expected.statistic)
    with pytest.raises(ValueError, match="no t runs"):
        le.differences(rows, "t", "course", "minilm")


def test_a_budget_with_one_shared_seed_is_left_out_of_differences_and_compared():
    rows = [{"task": "t", "model": m, "budget": b, "n_train": b, "seed": s, "collapsed": False,
             "test_accuracy": 0.5 + s / 10 + (m == "a") / 5}
            for m in ("a", "b") for b, seeds in ((50, (0, 1)), (100, (0,))) for s in seeds]
    assert list(le.differences(rows, "t", "a", "b")) == [50]
    (test,) = le.compared(rows, [("t", "a", "b")])
    assert test["runs"] == 3 and [e["budget"] for e in test["by_budget"]] == [50]


def test_compared_is_one_sign_test_per_comparison_over_the_paired_runs_with_holm():
    from scipy import stats

    def rows_for(model, accuracies, budget):
        return [{"task": "t", "model": model, "budget": budget, "n_train": budget, "seed": s, "test_accuracy": a,
                 "collapsed": False} for s, a in enumerate(accuracies)]

    rows = (rows_for("a", (0.70, 0.71, 0.72), 50) + rows_for("b", (0.50, 0.50, 0.51), 50)
            + rows_for("a", (0.60, 0.50, 0.70, 0.8), 100) + rows_for("b", (0.55, 0.56, 0.54), 100)
            + rows_for("c", (0.50, 0.50, 0.51), 50) + rows_for("c", (0.55, 0.56, 0.54), 100))
    first, second = le.compared(rows, [("t", "a", "b"), ("t", "b", "c")])
    assert (first["runs"], first["ahead"], first["behind"]) == (6, 5, 1)  # a's seed 3 at 100 has no partner
    assert first["p"] == pytest.approx(stats.binomtest(5, 6).pvalue)
    assert (second["ahead"], second["behind"]) == (0, 0) and second["p"] == 1.0  # b and c tie everywhere
    assert first["adjusted_p"] == pytest.approx(min(1.0, 2 * first["p"])) and not first["detected"]
    assert [e["budget"] for e in first["by_budget"]] == [50, 100]
    assert first["by_budget"][0]["mean_difference"] == pytest.approx(0.2067, abs=1e-4)
    with pytest.raises(ValueError, match="same budget and seed"):
        le.compared(rows, [("t", "a", "nobody")])


def test_an_unknown_model_without_a_source_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="model='nope': use one of random, course, minilm, bow, bow_pairs, course_pll"):
        label_grid.run_task("word_order", "nope", 50, seed=0, quick=True)


def test_zero_shot_models_are_the_checkpoint_a_seeded_random_twin_and_minilm_when_installed():
    import torch

    from mlm_course import models
    from mlm_course.bert import BertMLM

    first, second = label_grid.zero_shot_models(seed=3), label_grid.zero_shot_models(seed=3)
    shipped, _ = models.load_mlm("course")
    weights = {name: dict(pair[0].named_parameters()) for name, pair in first.items()}
    assert all(torch.equal(p, weights["course"][n]) for n, p in shipped.named_parameters())
    query = "layers.0.attention.query.weight"
    random_twin = weights["random"][query]
    assert isinstance(first["random"][0], BertMLM) and first["random"][0].config.to_dict() == shipped.config.to_dict()
    assert random_twin.shape == weights["course"][query].shape
    assert not torch.equal(random_twin, weights["course"][query])
    assert torch.equal(random_twin, dict(second["random"][0].named_parameters())[query])  # same seed, same model
    assert not torch.equal(random_twin, dict(label_grid.zero_shot_models(seed=4)["random"][0].named_parameters())[query])
    assert ("minilm" in first) == (models.minilm_dir() is not None)
    assert all(not model.training for model, _ in first.values())


def test_the_dev_set_grows_with_the_budget_and_rows_keep_their_test_predictions(monkeypatch):
    assert [label_grid.dev_examples(b) for b in (50, 300, 1000, None)] == [50, 300, 400, 400]
    row = label_grid.run_task("sentiment", "bow_pairs", 50, seed=0, quick=True)
    assert row["n_dev"] == 50 and row["n_train"] == 50 and len(row["test_predictions"]) == 200
    assert set(row["test_predictions"]) <= {"0", "1"}
    share = row["test_predictions"].count("1") / len(row["test_predictions"])
    assert share == pytest.approx(row["predicted_positive_share"], abs=1e-4)


def test_a_bag_of_word_pairs_sees_what_a_swap_does_and_a_bag_of_words_does_not():
    words = label_grid.run_task("word_order", "bow", 1000, seed=0, quick=True)
    pairs = label_grid.run_task("word_order", "bow_pairs", 1000, seed=0, quick=True)
    assert words["test_accuracy"] == 0.5 and pairs["test_accuracy"] > 0.5


def test_zero_shot_comparisons_pair_the_reference_with_each_scorer_on_the_same_pairs():
    from scipy import stats

    table = {"heldout": {"course": {"outcomes": [1] * 90 + [0] * 10},
                         "bigram": {"outcomes": [1] * 70 + [0] * 20 + [1] * 10},
                         "random": {"accuracy": 0.5}},  # no outcomes stored: not compared
             "reviews": {"course": {"outcomes": [1, 0] * 50}, "bigram": {"outcomes": [1, 0] * 50}}}
    tests = le.zero_shot_comparisons(table)
    assert [(t["domain"], t["scorer"]) for t in tests] == [("heldout", "bigram"), ("reviews", "bigram")]
    heldout, reviews = tests
    assert heldout["only_reference"] == 20 and heldout["only_scorer"] == 10
    assert heldout["p"] == pytest.approx(stats.binomtest(20, 30).pvalue)
    assert heldout["mean_difference"] == pytest.approx(0.10) and heldout["low"] < 0.10 < heldout["high"]
    assert reviews["p"] == 1.0 and reviews["mean_difference"] == 0 and not reviews["detected"]
    assert heldout["adjusted_p"] == pytest.approx(min(1.0, 2 * heldout["p"]))


def test_the_zero_shot_table_scores_masked_lms_and_counted_models_on_the_same_pairs(monkeypatch):
    from mlm_course import models, ngram

    monkeypatch.setattr(models, "minilm_dir", lambda: None)  # the checkpoint and its random twin suffice here
    pairs = word_order.split("test").pairs()[:12]
    bigram = ngram.NgramModel(word_order.corpus_sentences("train"), 2)
    table = label_grid.zero_shot_table(pairs, label_grid.zero_shot_models(), {"bigram": bigram})
    assert list(table) == ["course", "random", "bigram"]
    assert table["bigram"]["outcomes"] == ngram.prefers_real(bigram, pairs)
    for row in table.values():
        assert len(row["outcomes"]) == row["pairs"] == 12 and row["wins"] == sum(row["outcomes"])
        assert row["low"] <= row["accuracy"] == row["wins"] / 12 <= row["high"]


def test_summaries_list_the_models_in_the_courses_order_whatever_order_the_rows_came_in():
    rows = [{"task": "t", "model": m, "budget": 50, "n_train": 50, "seed": 0, "test_accuracy": 0.5, "collapsed": False}
            for m in ("bow_pairs", "someone", "minilm", "course", "random")]
    assert list(le.summarise(rows, "t")) == ["random", "course", "minilm", "bow_pairs", "someone"]
