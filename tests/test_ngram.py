"""mlm_course.ngram: interpolated Kneser–Ney word models, against values worked out by hand and the rules any
probability model must obey."""

import math

import pytest

from mlm_course import ngram, word_order
from mlm_course.unigram import UNK


def test_bigram_probabilities_match_a_hand_computation():
    """Counted from "a b" and "a c" with D = 0.5 (worked out in full in the comments)."""
    model = ngram.NgramModel(["a b", "a c"], order=2, discount=0.5)
    # continuation counts: a 1, b 1, c 1, </s> 2 (total 5, 4 types); vocabulary a, b, c, </s>, <unk> (5)
    p_b = (1 - 0.5) / 5 + 0.5 * 4 / 5 / 5  # 0.18
    assert model.probability("b", ["a"]) == pytest.approx((1 - 0.5) / 2 + 0.5 * 2 / 2 * p_b)  # 0.34
    p_end = (2 - 0.5) / 5 + 0.5 * 4 / 5 / 5  # 0.38
    assert model.probability(ngram.EOS, ["a"]) == pytest.approx(0.5 * p_end)  # "a" never ends a sentence
    assert model.probability("zebra", ["a"]) == model.probability(UNK, ["a"]) == pytest.approx(0.5 * 0.5 * 4 / 25)
    p_a_first = (2 - 0.5) / 2 + 0.5 * 1 / 2 * p_b  # p(a | <s>): p_0(a) = p_0(b)
    p_end_after_b = (1 - 0.5) / 1 + 0.5 * 1 / 1 * p_end
    assert model.log_prob("A b") == pytest.approx(math.log(p_a_first * 0.34 * p_end_after_b))


@pytest.mark.parametrize("order", [2, 3])
def test_every_context_gets_a_distribution_that_sums_to_one(order):
    model = ngram.NgramModel(["the cat sat on the mat .", "the dog sat .", "a cat ran on the road ."], order=order)
    for context in (["the"], ["on", "the"], ["never", "seen"], [ngram.BOS, ngram.BOS], ["cat", "sat"]):
        total = sum(model.probability(word, context) for word in model.vocab)
        assert total == pytest.approx(1.0, abs=1e-12), context


def test_it_prefers_the_order_it_has_counted_and_a_bag_of_words_cannot():
    model = ngram.NgramModel(["the cat sat on the mat .", "the dog sat on the rug ."], order=2)
    pairs = [("the cat sat on the rug .", "cat the sat on the rug ."), ("the dog sat .", "the sat dog .")]
    assert ngram.prefers_real(model, pairs) == [1, 1]
    assert ngram.prefers_real(model, [("a b", "a b")]) == [0]  # a tie counts as a miss


def test_on_the_course_text_a_bigram_model_orders_most_held_out_pairs_and_a_trigram_no_worse():
    train = word_order.corpus_sentences("train")
    pairs = word_order.split("test").pairs()[:100]
    bigram = sum(ngram.prefers_real(ngram.NgramModel(train, 2), pairs))
    trigram = sum(ngram.prefers_real(ngram.NgramModel(train, 3), pairs))
    assert 80 <= bigram <= 99 and trigram >= bigram - 5  # 90 % and 90.7 % on all 300 test pairs


@pytest.mark.parametrize("kwargs, message", [({"order": 4}, "use 2"), ({"discount": 1.0}, "discount must be in")])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ngram.NgramModel(["a b"], **kwargs)
    with pytest.raises(ValueError, match="sentences is empty"):
        ngram.NgramModel([])


def test_a_character_model_counts_characters():
    model = ngram.NgramModel(["明月", "明天"], order=2, tokenize=list)
    assert model.padded("明月光") == [ngram.BOS, "明", "月", "光", ngram.EOS]
    assert model.vocab == {"明", "月", "天", ngram.EOS, UNK}
    assert model.probability("月", ["明"]) == model.probability("天", ["明"])


@pytest.mark.parametrize(("left", "right"), [("a", "c"), (ngram.BOS, "b"), ("b", ngram.EOS), (None, "c"), ("a", None),
                                             ("zebra", "a"), ("a", "zebra"), (None, None)])
def test_neighbour_log_scores_are_the_gap_posterior_computed_token_by_token(left, right):
    """log p(w | left) + log p(right | w) for every candidate w, against probability() called once per token; a
    hidden left neighbour is replaced by w's own (add-one) frequency as a context."""
    model = ngram.NgramModel(["a b", "a c", "b a c", "c"], order=2, discount=0.5)
    scores = model.neighbour_log_scores(left, right)
    as_context = {token: sum(c for (first, _), c in model.counts[1].items() if first == token) for token in model.vocab}
    for token, score in zip(model.candidates, scores, strict=True):
        own = (as_context[token] + 1) / (sum(as_context.values()) + len(model.vocab))  # add-one frequency
        expected = (math.log(model.probability(token, [left])) if left is not None else math.log(own)) + (
            math.log(model.probability(right, [token])) if right is not None else 0.0)
        assert score == pytest.approx(expected, abs=1e-12), token
    with pytest.raises(ValueError, match="bigram model"):
        ngram.NgramModel(["a b c"], order=3).neighbour_log_scores("a", "b")
