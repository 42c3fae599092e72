"""Figures of 01_why_log: surprisal bars, float underflow, counting vs gradient descent, loss gradients."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised, mark_as_data
from mlm_course.plots.style import DTYPE_COLORS, OKABE_ITO, SERIES_COLORS


@localised
def token_log_prob_bars(tokens, probs, *, pll: bool = False) -> Figure:
    """Per-token surprisal −ln p (nats) of one sentence, one horizontal bar per token, with p written beside it.

    ``pll=True``: each p is p(x_i | the rest of the sentence) from a masked LM, labelled as a pseudo-log-likelihood.
    """
    import math

    probs = [float(p) for p in probs]
    if len(tokens) != len(probs) or not tokens:
        raise ValueError("pass one probability per token (and at least one token).")
    surprisal = [-math.log(p) if p > 0 else math.inf for p in probs]
    finite = [s for s in surprisal if math.isfinite(s)]
    cap = 1.15 * max(finite) if finite else 1.0
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(tokens) + 1.2))
    ys = list(range(len(tokens)))[::-1]
    _ = ax.barh(ys, [min(s, cap) for s in surprisal], color=OKABE_ITO["blue"])
    for y, s, p in zip(ys, surprisal, probs, strict=True):
        _ = ax.text(min(s, cap), y, f" p={p:.2g}" if p > 0 else " p=0 (−ln p = ∞)", va="center", fontsize=9)
    ax.set_yticks(ys, [repr(t) for t in tokens])
    mark_as_data(ax.yaxis)
    ax.set_xlim(0, cap * 1.3)
    if pll:  # each p is p(x_i | the rest of the sentence): the sum is a pseudo-log-likelihood, not ln p(sentence)
        ax.set_xlabel("−ln p(xᵢ | rest of the sentence)  (nats)")
        ax.set_title(f"PLL = Σᵢ ln p(xᵢ | rest) = {-sum(surprisal):.2f} nats (a score, not ln p(sentence))")
    else:
        ax.set_xlabel("−ln p(token)  (nats)")
        ax.set_title(f"ln p(sentence) = Σ ln p(token) = {-sum(surprisal):.2f} nats")
    fig.tight_layout()
    return fig


@localised
def underflow_curves(probs, dtypes=None, title: str = "") -> Figure:
    """log10 of the running product of ``probs`` in each dtype, until it becomes exactly 0.0, on a log length axis.

    Each dtype's break point is marked × and by a vertical line with its length written beside it; the dashed
    black line is the exact value, Σ log10 p computed in float64; dotted lines are each dtype's smallest
    subnormal. Plotted as log10 (rather than on a log y axis) so the exact line can continue below 1e-308.
    """
    import math

    import torch
    from matplotlib.ticker import FuncFormatter

    from mlm_course import logprob

    dtypes = logprob.DTYPES if dtypes is None else tuple(dtypes)
    p = logprob._as_probabilities(probs).reshape(-1).to(torch.float64)
    zero_at = {d: logprob.underflow_length(p, d) for d in dtypes}
    last = max((n for n in zero_at.values() if n is not None), default=len(p))
    n_max = min(len(p), int(last * 1.3) + 2)
    ns = torch.arange(1, n_max + 1)
    exact = torch.cumsum(torch.log10(p[:n_max]), 0)
    fig, ax = plt.subplots(figsize=(9, 4.8), layout="constrained")
    _ = ax.plot(ns, exact, "k--", lw=1, label="exact: Σ log10 p (float64)")
    for k, d in enumerate(dtypes):
        name = str(d).replace("torch.", "")
        color = DTYPE_COLORS.get(name, SERIES_COLORS[k % len(SERIES_COLORS)])
        prod = logprob.running_product(p[:n_max], d).double()
        keep = prod > 0
        n = zero_at[d]
        label = f"{name}: 0.0 at n = {n}" if n is not None else f"{name}: never 0.0 here"
        _ = ax.plot(ns[keep], torch.log10(prod[keep]), color=color, lw=2, label=label, zorder=3 + len(dtypes) - k)
        _ = ax.axhline(math.log10(logprob.smallest_subnormal(d)), color=color, ls=":", lw=1)
        if n is not None and n <= n_max and math.isfinite(exact[n - 1].item()):
            y = exact[n - 1].item()
            _ = ax.axvline(n, color=color, ls="-", lw=0.8, alpha=0.6)
            _ = ax.plot([n], [y], "x", color=color, ms=10, mew=2)
            above = k % 2 == 0  # alternate sides so neighbouring break points keep their labels apart
            _ = ax.annotate(f"{name}: n = {n}", (n, y), textcoords="offset points", xytext=(6, 6) if above else (-6, -8),
                            ha="left" if above else "right", va="bottom" if above else "top", fontsize=9,
                            color=color, fontweight="bold")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    bottom, _ = ax.get_ylim()
    ax.set_ylim(bottom, -0.12 * bottom)  # room above the curve for the labels of early break points
    ax.set_xlabel("sequence length n (tokens, log scale)")
    ax.set_ylabel("log10 of the running product")
    ax.set_title(title or "When does the product of probabilities become exactly 0?")
    fig.legend(loc="outside lower center", ncol=3, fontsize=9, frameon=False,
               title="× and vertical line = first exact 0.0; dotted = the dtype's smallest subnormal", title_fontsize=9)
    return fig


@localised
def gd_vs_counts(nll_history, mle_nll: float, p_counts, p_gd) -> Figure:
    """Left: the NLL gap to the counting MLE over gradient-descent steps (log y). Right: fitted vs counted p."""
    import numpy as np

    gap = np.maximum(np.asarray(nll_history, dtype=float) - mle_nll, 1e-16)
    pc, pg = np.asarray(p_counts, dtype=float), np.asarray(p_gd, dtype=float)
    if pc.shape != pg.shape or pc.ndim != 1:
        raise ValueError("p_counts and p_gd must be 1-D arrays of the same length (one probability per word).")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    _ = a.semilogy(np.arange(len(gap)), gap, color=OKABE_ITO["blue"])
    a.set_xlabel("gradient-descent step")
    a.set_ylabel("NLL − NLL(counts)  (nats/token)")
    a.set_title("mean NLL approaches its minimum, the counts")
    _ = b.loglog(pc, pg, ".", ms=3, alpha=0.5, color=OKABE_ITO["blue"], label="one word")
    lo, hi = pc.min() / 2, pc.max() * 2
    _ = b.loglog([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    b.set_xlabel("p(word) by counting: count / N")
    b.set_ylabel("p(word) by gradient descent")
    b.set_title("same model, two ways to fit it")
    b.legend(fontsize=9)
    fig.tight_layout()
    return fig


@localised
def loss_gradients(num: int = 400) -> Figure:
    """−ln p versus 1 − p: the losses, their gradients w.r.t. p, and w.r.t. the true class's logit."""
    import torch

    from mlm_course import logprob

    p = torch.logspace(-4, 0, num, dtype=torch.float64)
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.8), layout="constrained")
    panels = [
        ("loss (nats for −ln p)", logprob.neg_log_loss(p), logprob.linear_loss(p), "linear"),
        ("|d loss / d p|", -logprob.grad_neg_log(p), -logprob.grad_linear_loss(p), "log"),
        ("|d loss / d z_true|  (via softmax)", -logprob.grad_logit_neg_log(p), -logprob.grad_logit_linear(p), "log"),
    ]
    for ax, (ylabel, log_curve, lin_curve, yscale) in zip(axes, panels, strict=True):
        _ = ax.plot(p, log_curve, color=OKABE_ITO["blue"], label="−ln p")
        _ = ax.plot(p, lin_curve, color=OKABE_ITO["orange"], ls="--", label="1 − p")
        ax.set_xscale("log")
        ax.set_yscale(yscale)
        ax.set_xlabel("p(true token)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=9)
    axes[0].set_title("the losses", fontsize=10)
    axes[1].set_title("w.r.t. p: −1/p vs −1", fontsize=10)
    axes[2].set_title("w.r.t. the logit: p − 1 vs −p(1 − p)", fontsize=10)
    return fig


@localised
def linear_vs_log_distance(values=(1.0, 0.1, 0.01, 0.001)) -> Figure:
    """The same probabilities on a linear number line and on a ln number line: the log stretches small ones apart.

    The title gives the gaps between neighbouring values on each line (computed, in the order given).
    """
    import math

    vals = [float(v) for v in values]
    if not vals or any(not 0 < v <= 1 for v in vals):
        raise ValueError("values must be probabilities in (0, 1] (ln 0 is −inf and cannot be drawn).")
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 3.0))
    for ax, xs, label in ((a, vals, "p (linear)"), (b, [math.log(v) for v in vals], "ln p (nats)")):
        _ = ax.plot(xs, [0] * len(xs), "o", color=OKABE_ITO["vermillion"])
        for i, (x, v) in enumerate(zip(xs, vals, strict=True)):  # alternate heights: close points keep their labels
            _ = ax.annotate(f"{v:g}", (x, 0), textcoords="offset points", xytext=(0, 6 + 12 * (i % 2)), ha="center",
                            fontsize=9)
        ax.set_yticks([])
        ax.set_xlabel(label)
        ax.spines[["left", "right", "top"]].set_visible(False)
    pairs = list(zip(vals, vals[1:], strict=False))
    linear = ", ".join(f"{abs(u - v):.3g}" for u, v in pairs)
    logs = ", ".join(f"{abs(math.log(u) - math.log(v)):.2f}" for u, v in pairs)
    a.set_title(f"gaps between neighbours: linear {linear};  ln {logs} nats", fontsize=10)
    fig.tight_layout()
    return fig
