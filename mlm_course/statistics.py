"""Intervals and comparisons for every "better than" claim of the course (notebooks 06–08).

The course's standard:

- Every interval is two-sided at 95 %, and "±" in prose is the half-width of that interval: a Student-t interval
  for a mean over seeds (:func:`mean_interval`), a Wilson interval for a proportion (:func:`wilson_interval`).
- Two results that share seeds or test sentences are compared paired, never as independent samples: per seed with
  :func:`paired_t`; per sentence with :func:`exact_mcnemar` (right or wrong) or :func:`paired_bootstrap` (a score
  such as a loss).
- The comparisons a section makes are one family: their p-values go through Holm's step-down correction
  (:func:`holm`) at 5 %, and only a rejected hypothesis is called a difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence}: use a probability between 0 and 1, e.g. 0.95.")


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for the proportion ``successes / trials``; exactly 0.0 (1.0) at 0 (all) successes."""
    if trials <= 0:
        raise ValueError("trials must be positive to estimate a rate.")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes={successes} is not between 0 and trials={trials}.")
    _check_confidence(confidence)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    # at p = 0 or 1 the bound is exactly 0 or 1; the formula can miss it by a rounding error
    return (0.0 if successes == 0 else centre - half), (1.0 if successes == trials else centre + half)


def standard_error(values: Sequence[float]) -> float:
    """Sample standard deviation of ``values`` over √n (nan for a single value)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("no values: pass at least one (e.g. one result per seed).")
    return float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan


def t_half_width(se: float, n: int, confidence: float = 0.95) -> float:
    """Half-width of the Student-t ``confidence`` interval of a mean of ``n`` values with standard error ``se``
    (n − 1 degrees of freedom; nan when ``se`` is nan)."""
    from scipy import stats

    _check_confidence(confidence)
    return math.nan if math.isnan(se) else float(stats.t.ppf((1 + confidence) / 2, n - 1)) * se


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Mean of ``values`` and the half-width of its Student-t ``confidence`` interval (:func:`t_half_width`;
    nan for a single value)."""
    se = standard_error(values)
    return float(np.mean(np.asarray(values, dtype=float))), t_half_width(se, len(values), confidence)


def _pairs(a: Sequence[float], b: Sequence[float], test: str, least: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"{test} pairs by position: pass two flat lists of the same length, one value per seed or "
                         f"sentence in the same order (got shapes {a.shape} and {b.shape}).")
    if a.size < least:
        raise ValueError(f"{test} needs at least {least} pairs (got {a.size}): pass one value per seed or sentence.")
    return a, b


def paired_t(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> dict[str, float]:
    """Paired t-test of ``a`` against ``b`` (pairs by position, e.g. by seed): the mean of a − b, its t-interval
    (``low``, ``high``), ``t``, the two-sided ``p`` and ``n``; t and p are nan when every difference is 0."""
    from scipy import stats

    a, b = _pairs(a, b, "paired_t", least=2)
    mean, se = float(np.mean(a - b)), standard_error(a - b)
    half = t_half_width(se, a.size, confidence)
    t = mean / se if se > 0 else math.copysign(math.inf, mean) if mean else math.nan
    p = 2 * float(stats.t.sf(abs(t), a.size - 1))
    return {"mean_difference": mean, "low": mean - half, "high": mean + half, "t": t, "p": p, "n": a.size}


def exact_mcnemar(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> dict[str, float]:
    """Exact McNemar test of two classifiers on the same items: ``only_a`` (``only_b``) counts the items only a (b)
    got right, ``p`` is the two-sided exact binomial p of those discordant pairs (1.0 when there are none).

    This is also the exact sign test: for paired scores pass ``a > b`` and ``b > a`` (ties drop out)."""
    from scipy import stats

    a, b = _pairs(a_correct, b_correct, "exact_mcnemar", least=1)
    if not np.isin(a, (0, 1)).all() or not np.isin(b, (0, 1)).all():
        raise ValueError("exact_mcnemar takes right/wrong per item: pass booleans (or 0/1), not scores.")
    only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    p = stats.binomtest(only_a, only_a + only_b).pvalue if only_a + only_b else 1.0
    return {"only_a": only_a, "only_b": only_b, "n": a.size, "p": float(p)}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0,
                     confidence: float = 0.95) -> dict[str, float]:
    """Mean of a − b over items (pairs by position) with a percentile ``confidence`` interval from ``resamples``
    resamplings of the items (a numpy Generator seeded with ``seed``: the same seed gives the same interval)."""
    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples={resamples}: use a positive number, e.g. 10_000.")
    a, b = _pairs(a, b, "paired_bootstrap", least=2)
    differences, generator = a - b, np.random.default_rng(seed)
    block = max(1, 2**22 // differences.size)  # resamples drawn at once, to bound the memory
    means = []
    for start in range(0, resamples, block):
        items = generator.integers(0, differences.size, (min(block, resamples - start), differences.size))
        means.append(differences[items].mean(axis=1))
    low, high = np.quantile(np.concatenate(means), [(1 - confidence) / 2, (1 + confidence) / 2])
    return {"mean_difference": float(differences.mean()), "low": float(low), "high": float(high), "n": a.size}


@dataclass(frozen=True)
class HolmDecision:
    """One hypothesis after Holm's correction: its ``p``, the ``adjusted_p`` and whether it is ``rejected``."""

    p: float
    adjusted_p: float
    rejected: bool


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[HolmDecision]:
    """Holm's step-down correction of a family of p-values, in the input order: adjusted p-values (monotone in p,
    capped at 1) and which hypotheses are rejected at family-wise level ``alpha``."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or ((p < 0) | (p > 1) | np.isnan(p)).any():
        raise ValueError(f"p_values={list(p_values)}: pass a flat list of probabilities between 0 and 1.")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha}: use a family-wise level between 0 and 1, e.g. 0.05.")
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((p.size - np.arange(p.size)) * p[order]))
    return [HolmDecision(float(pi), float(ai), bool(ai <= alpha)) for pi, ai in zip(p, adjusted, strict=True)]
