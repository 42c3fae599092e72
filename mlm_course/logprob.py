"""Log-space arithmetic: why language models add log-probabilities instead of multiplying probabilities.

Everything the first notebook teaches, as small pure functions, in nats unless a name says ``bits`` (log base 2):
* products of probabilities and where they underflow to exactly 0.0 (:func:`running_product`,
  :func:`underflow_length`, :func:`underflow_estimate`), versus sums of logs (:func:`sum_log_probs`);
* negative log-likelihood and cross-entropy written out (:func:`nll`, :func:`cross_entropy_manual`);
* the log-sum-exp trick (:func:`naive_softmax`, :func:`stable_softmax`, :func:`logsumexp`, :func:`log_softmax`);
* perplexity and log bases (:func:`perplexity`, :func:`bits_per_token`, :func:`change_log_base`);
* the gradients of the log loss and of a linear loss (:func:`grad_neg_log`, :func:`grad_logit_neg_log`, …).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mlm_course.masking import IGNORE_INDEX

DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The floating-point formats compared in the underflow experiment, narrowest exponent range first."""


# ---- input validation -------------------------------------------------------------------------------------


def _as_float_tensor(x, name: str, *, allow_empty: bool = False) -> torch.Tensor:
    """``x`` as a floating tensor (Python floats become float64, so no precision is lost on the way in)."""
    if isinstance(x, torch.Tensor):
        t = x
    else:
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as exc:
            raise TypeError(f"{name} must be a number, a list of numbers or a tensor; got {type(x).__name__}") from exc
        if arr.dtype == object or arr.dtype.kind in "USV":
            raise TypeError(f"{name} must hold numbers; got values of type {arr.dtype}. Pass floats such as 0.5.")
        t = torch.from_numpy(np.array(arr, copy=True)) if arr.dtype.kind != "b" else torch.as_tensor(arr)
    if t.dtype == torch.bool or not (t.is_floating_point()):
        raise TypeError(
            f"{name} must be floating point, got dtype {t.dtype}: write 1.0 rather than 1, or call .float() / .double()."
        )
    if not allow_empty and t.numel() == 0:
        raise ValueError(f"{name} is empty: pass at least one value.")
    if torch.isnan(t).any():
        raise ValueError(f"{name} contains NaN: find where the NaN came from (e.g. 0/0 or inf - inf) and fix it there.")
    return t


def _as_probabilities(p, name: str = "probabilities") -> torch.Tensor:
    """Validated probabilities: floating, non-empty, no NaN, every value in [0, 1]."""
    t = _as_float_tensor(p, name)
    if (t < 0).any() or (t > 1).any():
        bad = t[(t < 0) | (t > 1)][0].item()
        raise ValueError(
            f"{name} must lie in [0, 1], found {bad!r}. If these are logits or log-probabilities, "
            "use log_softmax / exp first."
        )
    return t


def _check_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch dtype such as torch.float32, got {dtype!r}.")
    return dtype


def _as_number(x, name: str) -> float:
    """A single non-negative, non-NaN number (float, int, or a one-element tensor)."""
    if isinstance(x, torch.Tensor):
        if x.numel() != 1:
            raise ValueError(f"{name} must be a single number (e.g. a mean NLL), got a tensor of shape {tuple(x.shape)}.")
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(x).__name__}.")
    x = float(x)
    if math.isnan(x):
        raise ValueError(f"{name} is NaN: check the loss computation that produced it.")
    if x < 0:
        raise ValueError(
            f"{name} must be >= 0 (a negative log-likelihood), got {x}: did you pass a log-probability "
            "(negative) instead of its negation?"
        )
    return x


# ---- products versus sums of logs ------------------------------------------------------------------------


def running_product(probs, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The running products p1, p1·p2, p1·p2·p3, … computed in ``dtype``, rounding after every multiply.

    Each probability is first rounded to ``dtype``; each product is rounded to ``dtype`` as a model running in
    that format would. (A plain loop rather than ``torch.cumprod``, whose CPU kernel may carry the running
    product in a wider type for float16 / bfloat16.) Once the product is exactly 0.0 it stays 0.0.
    """
    p = _as_probabilities(probs).reshape(-1)
    dtype = _check_dtype(dtype)
    values = p.to(dtype)
    out = torch.zeros_like(values)
    acc = torch.ones((), dtype=dtype)
    for i, v in enumerate(values):
        acc = acc * v
        out[i] = acc
        if acc == 0:
            break  # the rest of ``out`` is already 0.0
    return out


def sequence_probability(probs, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The naive product of all ``probs`` in ``dtype`` (0-d tensor): the last entry of :func:`running_product`."""
    return running_product(probs, dtype)[-1]


def sum_log_probs(probs, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Σ ln p_i computed in ``dtype`` (0-d tensor): the log of the product, without ever forming the product."""
    p = _as_probabilities(probs)
    return torch.log(p.to(_check_dtype(dtype))).sum()


def smallest_subnormal(dtype: torch.dtype) -> float:
    """The smallest positive number ``dtype`` can store (its smallest subnormal), as a Python float.

    float16: 2**-24, bfloat16: 2**-133, float32: 2**-149, float64: 2**-1074.
    """
    info = torch.finfo(_check_dtype(dtype))
    exponent = round(math.log2(info.tiny)) + round(math.log2(info.eps))
    return math.ldexp(1.0, exponent)


def underflow_length(p, dtype: torch.dtype, max_length: int = 1_000_000) -> int | None:
    """The first length n at which the running product in ``dtype`` is exactly 0.0 (None if it never is).

    ``p`` is one probability, repeated, or a sequence of probabilities used in order (None if the product of
    the whole sequence is still > 0). Computed by simulating the products in ``dtype``, not by a formula.
    """
    dtype = _check_dtype(dtype)
    t = _as_probabilities(p, "p")
    if t.dim() > 0:
        zeros = (running_product(t, dtype) == 0).nonzero()
        return int(zeros[0]) + 1 if len(zeros) else None
    if max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}.")
    value = t.to(dtype)
    acc = torch.ones((), dtype=dtype)
    for n in range(1, max_length + 1):
        new = acc * value
        if new == 0:
            return n
        if new == acc:  # p rounds to 1 (or the product stopped shrinking): it will never reach 0
            return None
        acc = new
    return None


def underflow_estimate(p, dtype: torch.dtype) -> float:
    """The closed-form estimate ln(smallest subnormal) / ln(p) of :func:`underflow_length` (inf if p = 1).

    For a sequence, p is its geometric mean. It ignores rounding: the product becomes 0.0 only once it falls to
    *half* the smallest subnormal or below (round to nearest, ties to even), and narrow formats round p and
    each product.
    """
    t = _as_probabilities(p, "p").to(torch.float64)
    mean_log = torch.log(t).mean().item()
    if mean_log == 0.0:
        return math.inf
    return math.log(smallest_subnormal(dtype)) / mean_log


@dataclass(frozen=True)
class UnderflowRow:
    """One row of :func:`underflow_table`."""

    dtype: str
    length: int | None
    estimate: float
    smallest_subnormal: float


def underflow_table(p, dtypes: Sequence[torch.dtype] = DTYPES) -> list[UnderflowRow]:
    """:func:`underflow_length` and :func:`underflow_estimate` of ``p`` for each dtype."""
    return [
        UnderflowRow(str(d).replace("torch.", ""), underflow_length(p, d), underflow_estimate(p, d), smallest_subnormal(d))
        for d in dtypes
    ]


# ---- likelihood, NLL, cross-entropy -----------------------------------------------------------------------


def nll(probs, reduction: str = "mean") -> torch.Tensor:
    """Negative log-likelihood of the probabilities a model gave the *true* tokens: mean (or sum) of −ln p.

    A probability of exactly 0 gives +inf (the model said the observed token was impossible).
    """
    p = _as_probabilities(probs)
    losses = -torch.log(p)
    return _reduce(losses, reduction)


def _reduce(losses: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")


def cross_entropy_manual(
    logits: torch.Tensor, target: torch.Tensor, reduction: str = "mean", ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """``F.cross_entropy`` written out: −log_softmax(logits)[target], then reduced.

    ``logits``: (C,) or (N, C); flatten (batch, seq, vocab) to (batch·seq, vocab) first, as BertForMaskedLM
    does. ``target``: class indices (integer dtype, shape () or (N,)), where ``ignore_index`` marks positions
    that are skipped (loss 0 under 'none'; excluded from the count under 'mean', so an all-ignored batch
    gives nan, exactly like torch); or class probabilities (floating, same shape as ``logits``), the loss
    then being −Σ_c q_c log_softmax(logits)_c. A one-hot ``q`` gives the same loss as the index.
    """
    logits = _as_float_tensor(logits, "logits")
    if logits.dim() not in (1, 2):
        raise ValueError(
            f"logits must have shape (C,) or (N, C), got {tuple(logits.shape)}: flatten (batch, seq, vocab) "
            "with logits.view(-1, vocab) and the target with target.view(-1)."
        )
    if not isinstance(target, torch.Tensor):
        raise TypeError(f"target must be a tensor, got {type(target).__name__}: use torch.tensor(...).")
    logp = log_softmax(logits, dim=-1)
    if target.is_floating_point():
        if target.shape != logits.shape:
            raise ValueError(
                f"probability targets must have the logits' shape {tuple(logits.shape)}, got {tuple(target.shape)}."
            )
        _as_probabilities(target, "target probabilities")
        # 0·(−inf) would be nan; a class with q = 0 contributes nothing
        losses = -torch.where(target > 0, target * logp, torch.zeros_like(logp)).sum(-1)
        return _reduce(losses, reduction)
    if target.dtype == torch.bool:
        raise TypeError("target must hold class indices (torch.long) or probabilities (float), not booleans.")
    expected = logits.shape[:-1]
    if target.shape != expected:
        raise ValueError(f"class-index target must have shape {tuple(expected)} for logits {tuple(logits.shape)}, "
                         f"got {tuple(target.shape)}.")
    num_classes = logits.shape[-1]
    keep = target != ignore_index
    if ((target[keep] < 0) | (target[keep] >= num_classes)).any():
        raise ValueError(
            f"target holds a class index outside [0, {num_classes - 1}] that is not ignore_index={ignore_index}."
        )
    safe = torch.where(keep, target, torch.zeros_like(target)).long()
    picked = logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    losses = torch.where(keep, -picked, torch.zeros_like(picked))
    if reduction == "mean":
        return losses.sum() / keep.sum()  # 0/0 = nan when every position is ignored, as in torch
    return _reduce(losses, reduction)


# ---- softmax and the log-sum-exp trick --------------------------------------------------------------------


def naive_softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / Σ exp(x), straight from the definition: exp overflows to inf for x > ~88.7 (float32) → nan."""
    x = _as_float_tensor(logits, "logits")
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def stable_softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x − max x) / Σ exp(x − max x): the same function (the shift cancels), but no exp exceeds 1."""
    x = _as_float_tensor(logits, "logits")
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def logsumexp(logits: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """ln Σ exp(x) = m + ln Σ exp(x − m) with m = max x: finite for huge and tiny x alike.

    Matches ``torch.logsumexp``, including −inf for an all −inf slice and +inf when some x is +inf.
    """
    x = _as_float_tensor(logits, "logits")
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # all −inf or some +inf: shift by 0 instead
    out = m + torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))
    return out if keepdim else out.squeeze(dim)


def log_softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """x − logsumexp(x): log-probabilities, computed without forming the (possibly underflowing) softmax.

    Written as (x − m) − ln Σ exp(x − m), m = max x, so large logits lose no precision in the subtraction.
    """
    x = _as_float_tensor(logits, "logits")
    m = x.amax(dim=dim, keepdim=True)
    shifted = x - torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


# ---- perplexity and log bases -----------------------------------------------------------------------------


def perplexity(nll_mean) -> float:
    """exp(mean NLL in nats): the size of a uniform distribution that would be as surprised, per token."""
    return math.exp(_as_number(nll_mean, "nll_mean"))


def bits_per_token(nll_mean) -> float:
    """The mean NLL converted from nats to bits (log base 2): nats / ln 2."""
    return _as_number(nll_mean, "nll_mean") / math.log(2)


def change_log_base(value, from_base: float, to_base: float) -> float:
    """A logarithm taken in ``from_base`` re-expressed in ``to_base``: log_b(x) = ln(x) / ln(b)."""
    for name, base in (("from_base", from_base), ("to_base", to_base)):
        if not isinstance(base, (int, float)) or isinstance(base, bool) or base <= 0 or base == 1:
            raise ValueError(f"{name} must be a positive number other than 1 (e.g. math.e, 2 or 10), got {base!r}.")
    if isinstance(value, torch.Tensor):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"value must be a number (a logarithm), got {type(value).__name__}.")
    return float(value) * math.log(from_base) / math.log(to_base)


# ---- gradients: log loss versus a linear loss -------------------------------------------------------------


def neg_log_loss(p) -> torch.Tensor:
    """−ln p, the loss of giving the true token probability p."""
    return -torch.log(_as_probabilities(p, "p"))


def grad_neg_log(p) -> torch.Tensor:
    """d(−ln p)/dp = −1/p: huge when the model is confidently wrong (p → 0)."""
    return -1.0 / _as_probabilities(p, "p")


def linear_loss(p) -> torch.Tensor:
    """1 − p, a loss that is also 0 at p = 1 but punishes every probability unit equally."""
    return 1.0 - _as_probabilities(p, "p")


def grad_linear_loss(p) -> torch.Tensor:
    """d(1 − p)/dp = −1, whatever p is."""
    return torch.full_like(_as_probabilities(p, "p"), -1.0)


def grad_logit_neg_log(p) -> torch.Tensor:
    """d(−ln softmax(z)_y)/dz_y = p − 1 where p = softmax(z)_y: the −1/p is cancelled by dp/dz_y = p(1 − p),
    leaving a gradient of size ≈ 1 for a confident mistake."""
    return _as_probabilities(p, "p") - 1.0


def grad_logit_linear(p) -> torch.Tensor:
    """d(1 − softmax(z)_y)/dz_y = −p(1 − p): it vanishes as p → 0, so a confident mistake barely learns."""
    q = _as_probabilities(p, "p")
    return -q * (1.0 - q)
