"""A word-level unigram language model: the simplest model of text, notebook 01's running example.

Every token is drawn independently with probability p(w). :class:`UnigramModel` fits p by counting (maximum
likelihood, or add-α smoothing), on tokens from :func:`word_tokens`; :func:`fit_unigram_gd` fits the same p by
gradient descent on the NLL and recovers the counts.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from mlm_course.logprob import nll, perplexity
from mlm_course.steps import training_step

UNK = "<unk>"
"""The vocabulary slot that every word unseen in training is mapped to by :class:`UnigramModel`."""

_WORD_RE = re.compile(r"[^\W\d_]+|\d+|[^\w\s]|_")


def word_tokens(text: str) -> list[str]:
    """The course's word-level tokenisation: lower-case, then runs of letters, runs of digits, and every
    other non-space character on its own ("Don't!" → ["don", "'", "t", "!"])."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}.")
    return _WORD_RE.findall(text.lower())


def unigram_counts(tokens: Iterable[str]) -> Counter:
    """How often each token occurs (a ``collections.Counter``)."""
    if isinstance(tokens, str):
        raise TypeError("tokens must be a list of tokens, not one string: call word_tokens(text) first.")
    counts = Counter(tokens)
    if not counts:
        raise ValueError("tokens is empty: fit the model on at least one token.")
    return counts


@dataclass(frozen=True)
class UnigramModel:
    """p(w) = (count(w) + α) / (N + α·(V + 1)): every token drawn independently of its neighbours.

    ``vocab`` holds the V training types (most frequent first) followed by :data:`UNK`, whose count is 0: every
    word unseen in training is mapped to it. With ``alpha = 0`` (the maximum-likelihood estimate) an unseen
    word therefore gets probability 0 and log-probability −inf; ``alpha > 0`` (add-α smoothing) gives every
    slot, ``UNK`` included, some mass.
    """

    vocab: tuple[str, ...]
    counts: torch.Tensor  # int64, aligned with vocab (UNK last, count 0)
    alpha: float = 0.0
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.vocab) != len(self.counts) or not self.vocab or self.vocab[-1] != UNK:
            raise ValueError(f"vocab must list one word per count and end with {UNK!r}; build the model with .fit().")
        if not self._index:
            object.__setattr__(self, "_index", {w: i for i, w in enumerate(self.vocab)})

    @classmethod
    def fit(cls, tokens: Iterable[str], alpha: float = 0.0) -> UnigramModel:
        """Count ``tokens`` (maximum likelihood when ``alpha`` = 0)."""
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not alpha >= 0 or math.isinf(alpha):
            raise ValueError(f"alpha must be a finite number >= 0 (0 = maximum likelihood), got {alpha!r}.")
        counts = unigram_counts(tokens)
        if UNK in counts:
            raise ValueError(f"the training tokens contain the reserved token {UNK!r}: rename it before fitting.")
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        vocab = tuple(w for w, _ in ordered) + (UNK,)
        tensor = torch.tensor([c for _, c in ordered] + [0], dtype=torch.int64)
        return cls(vocab, tensor, float(alpha), {w: i for i, w in enumerate(vocab)})

    @property
    def total(self) -> int:
        """N, the number of training tokens."""
        return int(self.counts.sum())

    @property
    def probs(self) -> torch.Tensor:
        """p over ``vocab`` (float64, sums to 1)."""
        c = self.counts.to(torch.float64)
        return (c + self.alpha) / (self.total + self.alpha * len(self.vocab))

    def index(self, token: str) -> int:
        """The vocabulary slot of ``token`` (that of UNK for an unseen token)."""
        return self._index.get(token, self._index[UNK])

    def token_probs(self, tokens: Sequence[str]) -> torch.Tensor:
        """p(token) for each token (float64)."""
        if isinstance(tokens, str):
            raise TypeError("tokens must be a list of tokens, not one string: call word_tokens(text) first.")
        if len(tokens) == 0:
            raise ValueError("tokens is empty: pass at least one token.")
        return self.probs[torch.tensor([self.index(t) for t in tokens])]

    def log_prob(self, tokens: Sequence[str]) -> float:
        """ln p(sentence) = Σ ln p(token): −inf as soon as one token has probability 0."""
        return torch.log(self.token_probs(tokens)).sum().item()

    def nll(self, tokens: Sequence[str]) -> float:
        """Mean NLL per token in nats."""
        return nll(self.token_probs(tokens)).item()

    def perplexity(self, tokens: Sequence[str]) -> float:
        """exp(mean NLL) on ``tokens``."""
        return perplexity(self.nll(tokens))


@dataclass(frozen=True)
class GDFit:
    """The result of :func:`fit_unigram_gd`."""

    probs: torch.Tensor  # softmax of the fitted logits (float64)
    nll_history: list[float]  # mean NLL (nats per token) before each step, then after the last one


def fit_unigram_gd(
    counts, steps: int, lr: float = 0.5, seed: int = 0, generator: torch.Generator | None = None
) -> GDFit:
    """Fit p = softmax(θ) to ``counts`` by minimising the mean NLL −Σ c_w ln p_w / Σ c_w with Adam, one
    :func:`mlm_course.steps.training_step` at a time (the step notebook 06 trains BERT with).

    θ starts from N(0, 1) drawn with ``generator`` (or one seeded with ``seed``); the learning rate decays
    linearly to 0. The NLL is convex in θ and its minimum is the counting estimate p_w = c_w / N, so the fit
    approaches the counts; every count must be > 0 (a zero count's optimum is θ_w = −∞, which no finite
    step reaches).
    """
    c = torch.as_tensor(counts)
    if c.dtype == torch.bool or c.dim() != 1 or c.numel() < 2:
        raise ValueError("counts must be a 1-D tensor with at least two entries (one count per word).")
    if torch.isnan(c.double()).any() or (c <= 0).any():
        raise ValueError("every count must be > 0: drop unseen words (such as <unk> with count 0) before fitting.")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}.")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}.")
    freq = c.to(torch.float64) / c.to(torch.float64).sum()
    if generator is None:
        generator = torch.Generator().manual_seed(seed)
    model = UnigramLogits(torch.randn(len(freq), generator=generator, dtype=torch.float64))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 - step / steps)
    no_batch = [{}]  # the data is the counts themselves
    history = [float(training_step(model, no_batch, lambda m, _: m.nll(freq), opt, sched, max_grad_norm=None)["loss"])
               for _ in range(steps)]
    with torch.no_grad():
        history.append(float(model.nll(freq)))
        return GDFit(torch.exp(torch.log_softmax(model.theta, dim=0)), history)


class UnigramLogits(torch.nn.Module):
    """θ, one logit per word: the unigram model p = softmax(θ) as a module the course's training step can train."""

    def __init__(self, theta: torch.Tensor):
        super().__init__()
        self.theta = torch.nn.Parameter(theta)

    def nll(self, freq: torch.Tensor) -> torch.Tensor:
        """The mean negative log-likelihood of words drawn with frequencies ``freq``: −Σ f_w ln softmax(θ)_w."""
        return -(freq * torch.log_softmax(self.theta, dim=0)).sum()
