"""mlm_course.unigram against hand-computed counts and the counting (maximum-likelihood) estimate."""

import math

import pytest
import torch

from mlm_course import unigram as U


def test_word_tokens_rule():
    assert U.word_tokens("Don't stop, Mr. Darcy! 1813") == ["don", "'", "t", "stop", ",", "mr", ".", "darcy", "!", "1813"]
    assert U.word_tokens("Café   naïve") == ["café", "naïve"]
    assert U.word_tokens("") == []
    with pytest.raises(TypeError, match="must be a str"):
        U.word_tokens(["a"])


def test_unigram_counting_mle():
    tokens = ["the", "cat", "sat", "on", "the", "mat", "the", "end"]
    model = U.UnigramModel.fit(tokens)
    assert model.vocab[0] == "the" and model.vocab[-1] == U.UNK
    assert model.total == 8
    assert model.probs.sum().item() == pytest.approx(1.0)
    assert model.token_probs(["the", "cat"]).tolist() == pytest.approx([3 / 8, 1 / 8])
    assert model.log_prob(["the", "cat"]) == pytest.approx(math.log(3 / 8) + math.log(1 / 8))
    assert model.nll(["the", "cat"]) == pytest.approx(-(math.log(3 / 8) + math.log(1 / 8)) / 2)
    # an unseen word gets probability 0 under the MLE: log-prob −inf, perplexity inf
    assert model.token_probs(["dog"]).item() == 0.0
    assert model.log_prob(["the", "dog"]) == -math.inf
    assert model.perplexity(["dog"]) == math.inf


def test_unigram_add_alpha_smoothing():
    tokens = ["a", "a", "b"]
    model = U.UnigramModel.fit(tokens, alpha=1.0)  # vocab a, b, <unk>: (2+1)/(3+3), (1+1)/6, (0+1)/6
    assert model.probs.tolist() == pytest.approx([0.5, 1 / 3, 1 / 6])
    assert model.token_probs(["zebra", "a"]).tolist() == pytest.approx([1 / 6, 0.5])
    assert math.isfinite(model.log_prob(["zebra"]))


def test_unigram_bad_input():
    with pytest.raises(ValueError, match="empty"):
        U.UnigramModel.fit([])
    with pytest.raises(TypeError, match="not one string"):
        U.UnigramModel.fit("the cat")
    with pytest.raises(ValueError, match="alpha"):
        U.UnigramModel.fit(["a"], alpha=-1)
    with pytest.raises(ValueError, match="reserved"):
        U.UnigramModel.fit(["a", U.UNK])
    model = U.UnigramModel.fit(["a"])
    with pytest.raises(ValueError, match="empty"):
        model.token_probs([])
    with pytest.raises(TypeError, match="not one string"):
        model.token_probs("a")
    with pytest.raises(ValueError, match="end with"):
        U.UnigramModel(("a",), torch.tensor([1]))


def test_gradient_descent_reaches_the_counting_mle():
    g = torch.Generator().manual_seed(0)
    # Zipf-like counts over 500 words, from 5000 down to 1
    counts = torch.clamp((5000 / torch.arange(1, 501, dtype=torch.float64)).round(), min=1).long()
    counts = counts[torch.randperm(500, generator=g)]
    fit = U.fit_unigram_gd(counts, steps=300, seed=0)
    mle = counts.double() / counts.sum()
    mle_nll = -(mle * mle.log()).sum().item()
    assert fit.nll_history[-1] >= mle_nll - 1e-12  # the counts are the minimum: GD can only approach it
    assert fit.nll_history[-1] - mle_nll < 1e-6
    assert fit.nll_history[-1] < fit.nll_history[0]
    assert len(fit.nll_history) == 301
    assert (fit.probs - mle).abs().max().item() < 1e-5
    assert ((fit.probs / mle).log().abs().max().item()) < 0.01  # every word within 1 % of its count estimate
    assert fit.probs.sum().item() == pytest.approx(1.0)


def test_gradient_descent_is_seeded():
    counts = torch.tensor([5, 3, 1])
    a = U.fit_unigram_gd(counts, steps=20, seed=1)
    b = U.fit_unigram_gd(counts, steps=20, generator=torch.Generator().manual_seed(1))
    c = U.fit_unigram_gd(counts, steps=20, seed=2)
    assert torch.equal(a.probs, b.probs)
    assert not torch.equal(a.probs, c.probs)


def test_gradient_descent_bad_input():
    with pytest.raises(ValueError, match="> 0"):
        U.fit_unigram_gd(torch.tensor([3, 0]), steps=10)
    with pytest.raises(ValueError, match="1-D"):
        U.fit_unigram_gd(torch.tensor([3]), steps=10)
    with pytest.raises(ValueError, match="steps"):
        U.fit_unigram_gd(torch.tensor([3, 1]), steps=0)
    with pytest.raises(ValueError, match="lr"):
        U.fit_unigram_gd(torch.tensor([3, 1]), steps=5, lr=0)
