"""Word n-gram language models counted from text: the baseline a masked LM must beat on word order (notebook 07).

An n-gram model scores a sentence left to right, each word given only the n − 1 words before it:
log p(sentence) = Σ log p(w_i | w_{i−n+1} … w_{i−1}), with ``<s>`` before the first word and ``</s>`` after the last.
The probabilities are counts, smoothed by **interpolated Kneser–Ney** (Kneser & Ney 1995; Chen & Goodman 1999,
§3.5): every seen n-gram gives up a fixed discount ``D``, and the freed mass goes to a lower-order model whose counts
are *continuation* counts — in how many different contexts a word was seen, not how often — so that a word that is
frequent only after one neighbour ("Francisco" after "San") does not look likely everywhere. Unseen words share the
mass of ``<unk>``. Words are :func:`mlm_course.unigram.word_tokens` (lower case, punctuation on its own), or what
``tokenize`` makes of a sentence (``tokenize=list``: a character model, notebook 10).

Swapping two words changes which word pairs occur: a bigram model can notice that; a bag of words cannot. And a
bigram model can fill a gap: under it, p(x_i = w | x_{i−1}, x_{i+1}) ∝ p(w | x_{i−1}) · p(x_{i+1} | w)
(:meth:`NgramModel.neighbour_log_scores`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property

import numpy as np

from mlm_course.unigram import UNK, word_tokens

BOS, EOS = "<s>", "</s>"


class NgramModel:
    """An interpolated Kneser–Ney model of ``order`` (2: bigrams, 3: trigrams) counted from ``sentences``, each cut
    into tokens by ``tokenize`` (default: the course's words; ``list``: characters)."""

    def __init__(self, sentences: Iterable[str], order: int = 2, discount: float = 0.75,
                 tokenize: Callable[[str], list[str]] = word_tokens):
        if order not in (2, 3):
            raise ValueError(f"order={order!r}: use 2 (bigrams) or 3 (trigrams)")
        if not 0 < discount < 1:
            raise ValueError(f"discount must be in (0, 1), not {discount!r}")
        self.order, self.discount, self.tokenize = order, discount, tokenize
        self.counts = [Counter() for _ in range(order)]  # counts[k]: (k + 1)-grams, Kneser–Ney counts below the top
        for sentence in sentences:
            for gram in self._grams(self.padded(sentence)):
                self.counts[-1][gram] += 1
        if not self.counts[-1]:
            raise ValueError("sentences is empty: count at least one sentence")
        for k in range(order - 1, 0, -1):  # a lower-order count: in how many contexts the shorter n-gram follows
            for gram in self.counts[k]:
                self.counts[k - 1][gram[1:]] += 1
        self.vocab = {gram[0] for gram in self.counts[0]} | {UNK}
        self.context_totals = [Counter() for _ in range(order)]  # Σ_w count(context, w), per order
        self.context_types = [Counter() for _ in range(order)]  # how many different w follow the context
        for k, counts in enumerate(self.counts):
            for gram, count in counts.items():
                self.context_totals[k][gram[:-1]] += count
                self.context_types[k][gram[:-1]] += 1

    def padded(self, sentence: str) -> list[str]:
        """``sentence`` as the model reads it: ``<s>`` × (order − 1), its tokens, ``</s>``."""
        return [BOS] * (self.order - 1) + list(self.tokenize(sentence)) + [EOS]

    def _grams(self, words: Sequence[str]) -> Iterable[tuple[str, ...]]:
        return (tuple(words[i : i + self.order]) for i in range(len(words) - self.order + 1))

    def probability(self, word: str, context: Sequence[str]) -> float:
        """p(word | the last order − 1 words of ``context``), interpolated down to the uniform distribution."""
        word = word if word in self.vocab else UNK
        context = tuple(context[len(context) - self.order + 1 :]) if self.order > 1 else ()
        p = 1 / len(self.vocab)
        for k in range(self.order):  # from unigrams up: p_k = (c − D)⁺ / total + D · types / total · p_{k−1}
            history = context[len(context) - k :] if k else ()
            total = self.context_totals[k][history]
            if total == 0:
                continue  # a context never seen: keep the lower order's estimate
            seen = max(self.counts[k][(*history, word)] - self.discount, 0.0)
            p = seen / total + self.discount * self.context_types[k][history] / total * p
        return p

    def log_prob(self, sentence: str) -> float:
        """log p(sentence), in nats."""
        words = self.padded(sentence)
        start = self.order - 1
        return sum(math.log(self.probability(words[i], words[i - start : i])) for i in range(start, len(words)))


    # ---- filling a gap (bigrams): every candidate at once -------------------------------------------------------

    @cached_property
    def candidates(self) -> tuple[str, ...]:
        """The vocabulary in a fixed (sorted) order: the order of :meth:`neighbour_log_scores`' entries."""
        return tuple(sorted(self.vocab))

    @cached_property
    def _bigram_tables(self) -> dict:
        index = {token: i for i, token in enumerate(self.candidates)}
        n, d = len(index), self.discount
        p0 = np.zeros(n)  # the unigram level of probability(): continuation counts, interpolated with uniform
        for (token,), count in self.counts[0].items():
            p0[index[token]] = max(count - d, 0.0)
        total0, types0 = self.context_totals[0][()], self.context_types[0][()]
        p0 = p0 / total0 + d * types0 / total0 / n
        totals = np.array([self.context_totals[1][(t,)] for t in self.candidates], dtype=float)
        backoff = np.array([self.context_types[1][(t,)] for t in self.candidates], dtype=float) * d
        after: dict[str, list] = {}
        before: dict[str, list] = {}
        for (first, second), count in self.counts[1].items():
            after.setdefault(first, []).append((index[second], count))
            if first in index:
                before.setdefault(second, []).append((index[first], count))
        return {"index": index, "p0": p0, "totals": totals, "backoff": backoff,
                "after": {k: np.array(v).T for k, v in after.items()},
                "before": {k: np.array(v).T for k, v in before.items()}}

    def neighbour_log_scores(self, left: str | None, right: str | None) -> np.ndarray:
        """For every token of :attr:`candidates`: log p(token | left) + log p(right | token), the bigram model's
        log-probability of the token in a gap between ``left`` and ``right`` (up to a constant). ``left=None`` (the
        left neighbour is hidden too) puts the token's own frequency in place of p(token | left): add-one smoothed
        counts of the token as a context, p(token) ∝ Σ_w c(token, w) + 1; ``right=None`` drops the right factor;
        ``left=BOS`` / ``right=EOS`` are the sentence's edges. Equals :meth:`probability` called token by token
        (tested), in one vectorised pass."""
        if self.order != 2:
            raise ValueError(f"neighbour_log_scores needs a bigram model (order=2), not order={self.order}.")
        t = self._bigram_tables
        scores = np.zeros(len(t["p0"]))
        if left is not None:
            left = left if left in self.vocab or left == BOS else UNK
            total = self.context_totals[1][(left,)]
            p = t["p0"].copy()
            if total:
                p *= self.discount * self.context_types[1][(left,)] / total
                if left in t["after"]:
                    idx, counts = t["after"][left]
                    p[idx] += np.maximum(counts - self.discount, 0) / total
            scores += np.log(p)
        else:
            scores += np.log((t["totals"] + 1) / (t["totals"].sum() + len(t["totals"])))
        if right is not None:
            right = right if right in self.vocab else UNK
            p_right = t["p0"][t["index"][right]]
            seen = np.zeros_like(scores)
            if right in t["before"]:
                idx, counts = t["before"][right]
                seen[idx] = np.maximum(counts - self.discount, 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                p = np.where(t["totals"] > 0, (seen + t["backoff"] * p_right) / t["totals"], p_right)
            scores += np.log(p)
        return scores


def prefers_real(model: NgramModel, pairs: Sequence[tuple[str, str]]) -> list[int]:
    """1 where the model gives the real sentence (first of each pair) the higher log-probability, else 0 (ties
    count as misses, as for the masked LM's pseudo-log-likelihood)."""
    return [int(model.log_prob(real) > model.log_prob(other)) for real, other in pairs]


__all__ = ["BOS", "EOS", "NgramModel", "prefers_real"]

