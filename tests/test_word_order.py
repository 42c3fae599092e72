"""The word-order task: balanced, disjoint, deterministic splits whose corruptions only move words."""

import random
from collections import Counter

import pytest

from mlm_course import corpus, models, word_order


@pytest.fixture(scope="module")
def splits():
    return {name: word_order.split(name) for name in word_order.SPLITS}


def test_splits_are_balanced_pairs_with_the_documented_sizes(splits):
    for name, data in splits.items():
        assert data.labels == [1, 0] * (len(data) // 2)
        assert data.kinds[0::2] == ["original"] * (len(data) // 2)
        assert set(data.kinds[1::2]) <= {"swap", "shuffle"}
        if name in word_order.SPLIT_SENTENCES:
            assert len(data) == 2 * word_order.SPLIT_SENTENCES[name]
    total = sum(len(d) for d in splits.values()) // 2
    assert total == len(word_order.heldout_sentences()) > 1000


def test_no_sentence_is_in_two_splits_and_none_was_trained_on(splits):
    originals = {name: set(d.texts[0::2]) for name, d in splits.items()}
    assert not originals["train"] & originals["dev"] and not originals["train"] & originals["test"]
    assert not originals["dev"] & originals["test"]
    training_text = corpus.pretraining_text("train")
    assert not [s for s in sorted(originals["test"] | originals["dev"]) if s in training_text]


def test_both_kinds_are_drawn_about_equally_often(splits):
    kinds = Counter(splits["train"].kinds[1::2])
    n = sum(kinds.values())
    # a fair coin per sentence: |share − 0.5| < 3.3 standard errors fails once in 1,000 seeds
    assert abs(kinds["swap"] / n - 0.5) < 3.3 * (0.25 / n) ** 0.5


def test_a_corruption_only_reorders_words(splits):
    data = splits["test"]
    for (real, fake), kind in zip(data.pairs(), data.kinds[1::2], strict=True):
        a, b = real.split(), fake.split()
        assert Counter(a) == Counter(b) and a != b  # same bag of words, different order
        moved = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        assert moved[-1] - moved[0] < (2 if kind == "swap" else word_order.SPAN)
        assert all(x.isalpha() or "'" in x or "-" in x for x in (a[i] for i in moved))


def test_same_seed_same_data_other_seed_other_data():
    assert word_order.split("dev", seed=0) == word_order.split("dev", seed=0)
    assert word_order.split("dev", seed=1).texts != word_order.split("dev", seed=0).texts


def test_corrupt_refuses_a_sentence_with_nothing_to_reorder():
    with pytest.raises(ValueError, match="no stretch"):
        word_order.corrupt("Yes, yes, yes.", random.Random(0))
    with pytest.raises(ValueError, match="split="):
        word_order.split("validation")


def test_the_course_checkpoint_prefers_real_sentences_zero_shot(splits):
    """40 test pairs; a model at chance reaches 31 wins with probability 0.03 % (binomial tail)."""
    model, tokenizer = models.load_mlm("course")
    result = word_order.zero_shot(model, tokenizer, splits["test"].pairs()[:40])
    assert result["wins"] >= 31 and result["low"] > 0.5
    assert result["low"] <= result["accuracy"] <= result["high"]
    assert len(result["outcomes"]) == 40 and sum(result["outcomes"]) == result["wins"]


def test_outcomes_are_summarised_as_an_accuracy_with_its_wilson_interval():
    from mlm_course.statistics import wilson_interval

    summary = word_order.summarise_outcomes([1, 1, 0, 1], confidence=0.9)
    assert (summary["accuracy"], summary["wins"], summary["pairs"]) == (0.75, 3, 4)
    assert (summary["low"], summary["high"]) == wilson_interval(3, 4, 0.9)
    assert summary["outcomes"] == [1, 1, 0, 1]


def test_the_review_split_is_the_same_task_on_review_sentences_no_course_model_trained_on(splits):
    reviews = word_order.review_split()
    assert reviews.split == "reviews" and reviews.labels == [1, 0] * word_order.SPLIT_SENTENCES["test"]
    test_reviews = {" ".join(t.split()) for t in corpus.sentiment("test").texts}
    assert set(reviews.texts[0::2]) <= test_reviews and len(set(reviews.texts[0::2])) == len(reviews) // 2
    for real, fake in reviews.pairs():
        assert Counter(real.split()) == Counter(fake.split()) and real != fake
    assert reviews == word_order.review_split() and reviews.texts != word_order.review_split(seed=1).texts
    trained_on = {" ".join(t.split()) for t in corpus.sentiment("train").texts}
    assert not set(reviews.texts[0::2]) & trained_on  # the task-adapted checkpoint read the training reviews


def test_pll_features_flag_the_badly_fitting_tokens_of_corrupted_copies():
    """Without a reference copy: the lowest token log-probability of a corrupted copy is lower than the real
    sentence's in most pairs (the checkpoint prefers the real one in 96 % of test pairs; here ≥ 70 % of 20)."""
    model, tokenizer = models.load_mlm("course")
    pairs = word_order.split("test").pairs()[:20]
    real = word_order.pll_features(model, tokenizer, [r for r, _ in pairs])
    fake = word_order.pll_features(model, tokenizer, [f for _, f in pairs])
    assert all(len(row) == 3 and row[1] <= row[2] and row[1] <= row[0] for row in real + fake)  # min ≤ 2nd, min ≤ mean
    assert sum(f[1] < r[1] for r, f in zip(real, fake, strict=True)) >= 14
