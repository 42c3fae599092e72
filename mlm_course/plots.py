"""The figures the notebooks show. Each function returns a matplotlib Figure (testable without a display)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

# ---- 01_why_log ----------------------------------------------------------------------------------------------


def token_log_prob_bars(tokens, probs) -> Figure:
    """Per-token surprisal −ln p (nats) of one sentence, one horizontal bar per token, with p written beside it."""
    import math

    probs = [float(p) for p in probs]
    if len(tokens) != len(probs) or not tokens:
        raise ValueError("pass one probability per token (and at least one token).")
    surprisal = [-math.log(p) if p > 0 else math.inf for p in probs]
    finite = [s for s in surprisal if math.isfinite(s)]
    cap = 1.15 * max(finite) if finite else 1.0
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(tokens) + 1.2))
    ys = list(range(len(tokens)))[::-1]
    _ = ax.barh(ys, [min(s, cap) for s in surprisal], color="tab:blue")
    for y, s, p in zip(ys, surprisal, probs, strict=True):
        _ = ax.text(min(s, cap), y, f" p={p:.2g}" if p > 0 else " p=0 (−ln p = ∞)", va="center", fontsize=8)
    ax.set_yticks(ys, [repr(t) for t in tokens])
    ax.set_xlim(0, cap * 1.3)
    ax.set_xlabel("−ln p(token)  (nats)")
    ax.set_title(f"ln p(sentence) = Σ ln p(token) = {-sum(surprisal):.2f} nats")
    fig.tight_layout()
    return fig


def underflow_curves(probs, dtypes=None, title: str = "") -> Figure:
    """log10 of the running product of ``probs`` in each dtype, until it becomes exactly 0.0 (marked ×).

    The dashed line is the exact value, Σ log10 p computed in float64; dotted lines are each dtype's smallest
    subnormal. Plotted as log10 (rather than on a log axis) so the exact line can continue below 1e-308.
    """
    import math

    import torch

    from mlm_course import logprob

    dtypes = logprob.DTYPES if dtypes is None else tuple(dtypes)
    p = logprob._as_probabilities(probs).reshape(-1).to(torch.float64)
    zero_at = {d: logprob.underflow_length(p, d) for d in dtypes}
    last = max((n for n in zero_at.values() if n is not None), default=len(p))
    n_max = min(len(p), int(last * 1.08) + 2)
    ns = torch.arange(1, n_max + 1)
    exact = torch.cumsum(torch.log10(p[:n_max]), 0)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    _ = ax.plot(ns, exact, "k--", lw=1, label="exact: Σ log10 p (float64)")
    for k, d in enumerate(dtypes):
        color = f"C{k}"
        name = str(d).replace("torch.", "")
        prod = logprob.running_product(p[:n_max], d).double()
        keep = prod > 0
        n = zero_at[d]
        label = f"{name}: 0.0 at n = {n}" if n is not None else f"{name}: never 0.0 here"
        _ = ax.plot(ns[keep], torch.log10(prod[keep]), color=color, lw=1.6, label=label)
        _ = ax.axhline(math.log10(logprob.smallest_subnormal(d)), color=color, ls=":", lw=0.8)
        if n is not None and n <= n_max and math.isfinite(exact[n - 1].item()):
            _ = ax.plot([n], [exact[n - 1].item()], "x", color=color, ms=10, mew=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("log10 of the running product")
    ax.set_title(title or "When does the product of probabilities become exactly 0?")
    ax.legend(loc="lower left", fontsize=8, title="× = first exact 0.0; dotted = smallest subnormal", title_fontsize=8)
    fig.tight_layout()
    return fig


def gd_vs_counts(nll_history, mle_nll: float, p_counts, p_gd) -> Figure:
    """Left: the NLL gap to the counting MLE over gradient-descent steps (log y). Right: fitted vs counted p."""
    import numpy as np

    gap = np.maximum(np.asarray(nll_history, dtype=float) - mle_nll, 1e-16)
    pc, pg = np.asarray(p_counts, dtype=float), np.asarray(p_gd, dtype=float)
    if pc.shape != pg.shape or pc.ndim != 1:
        raise ValueError("p_counts and p_gd must be 1-D arrays of the same length (one probability per word).")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    _ = a.semilogy(np.arange(len(gap)), gap)
    a.set_xlabel("gradient-descent step")
    a.set_ylabel("NLL − NLL(counts)  (nats/token)")
    a.set_title("mean NLL approaches its minimum, the counts")
    _ = b.loglog(pc, pg, ".", ms=3, alpha=0.5, label="one word")
    lo, hi = pc.min() / 2, pc.max() * 2
    _ = b.loglog([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    b.set_xlabel("p(word) by counting: count / N")
    b.set_ylabel("p(word) by gradient descent")
    b.set_title("same model, two ways to fit it")
    b.legend(fontsize=8)
    fig.tight_layout()
    return fig


def loss_gradients(num: int = 400) -> Figure:
    """−ln p versus 1 − p: the losses, their gradients w.r.t. p, and w.r.t. the true class's logit."""
    import torch

    from mlm_course import logprob

    p = torch.logspace(-4, 0, num, dtype=torch.float64)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = [
        ("loss", logprob.neg_log_loss(p), logprob.linear_loss(p), "linear"),
        ("|d loss / d p|", -logprob.grad_neg_log(p), -logprob.grad_linear_loss(p), "log"),
        ("|d loss / d z_true|  (through softmax)", -logprob.grad_logit_neg_log(p), -logprob.grad_logit_linear(p), "log"),
    ]
    for ax, (ylabel, log_curve, lin_curve, yscale) in zip(axes, panels, strict=True):
        _ = ax.plot(p, log_curve, label="−ln p")
        _ = ax.plot(p, lin_curve, label="1 − p")
        ax.set_xscale("log")
        ax.set_yscale(yscale)
        ax.set_xlabel("p = probability of the true token")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    axes[0].set_title("the losses")
    axes[1].set_title("gradient w.r.t. p: −1/p vs −1")
    axes[2].set_title("w.r.t. the logit: p − 1 vs −p(1 − p)")
    fig.tight_layout()
    return fig


def linear_vs_log_distance(values=(1.0, 0.1, 0.01, 0.001)) -> Figure:
    """The same probabilities on a linear number line and on a ln number line: the log stretches small ones apart."""
    import math

    vals = [float(v) for v in values]
    if not vals or any(not 0 < v <= 1 for v in vals):
        raise ValueError("values must be probabilities in (0, 1] (ln 0 is −inf and cannot be drawn).")
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 2.8))
    for ax, xs, label in ((a, vals, "p (linear)"), (b, [math.log(v) for v in vals], "ln p (nats)")):
        _ = ax.plot(xs, [0] * len(xs), "o", color="tab:red")
        for x, v in zip(xs, vals, strict=True):
            _ = ax.annotate(f"{v:g}", (x, 0), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        ax.set_yticks([])
        ax.set_xlabel(label)
        ax.spines[["left", "right", "top"]].set_visible(False)
    a.set_title("0.1 − 0.01 = 0.09 on the linear line; ln 0.1 − ln 0.01 = 2.30 nats on the log line")
    fig.tight_layout()
    return fig


# ---- 02_tokens -----------------------------------------------------------------------------------------------


def pieces_per_word_bars(counts: dict[str, dict[int, int]], *, max_pieces: int = 5) -> Figure:
    """Fraction of running words cut into 1, 2, … pieces, one bar group per tokenizer (log y axis).

    ``counts`` maps a tokenizer's name to ``{pieces: words}`` (``TokenStats.pieces_per_word``); words with
    ``max_pieces`` or more pieces share the last bar.
    """
    if not counts:
        raise ValueError("counts is empty: pass {name: {pieces: words}} for at least one tokenizer.")
    if max_pieces < 2:
        raise ValueError(f"max_pieces={max_pieces}: use 2 or more.")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(counts)
    xs = range(1, max_pieces + 1)
    for k, (name, per_word) in enumerate(counts.items()):
        total = sum(per_word.values())
        if total == 0:
            raise ValueError(f"counts[{name!r}] holds no words.")
        heights = [per_word.get(n, 0) / total for n in xs[:-1]]
        heights.append(sum(c for n, c in per_word.items() if n >= max_pieces) / total)
        ax.bar([x + (k - (len(counts) - 1) / 2) * width for x in xs], heights, width=width, label=name)
    ax.set_xticks(list(xs), [str(n) for n in xs[:-1]] + [f"{max_pieces}+"])
    ax.set_yscale("log")
    ax.set_xlabel("pieces per word")
    ax.set_ylabel("fraction of running words")
    ax.set_title("How often WordPiece splits a word")
    ax.legend()
    fig.tight_layout()
    return fig


# ---- 03_masking ----------------------------------------------------------------------------------------------

MASK_GRID_COLORS = {
    -1: ("#b9b9b9", "special / padding"),
    0: ("#ffffff", "not selected"),
    1: ("#4c72b0", "selected → [MASK]"),
    2: ("#dd8452", "selected → random token"),
    3: ("#55a868", "selected → unchanged"),
    4: ("#8172b3", "selected (before replacement)"),
}


def mask_grid(shown, codes, *, original=None, row_labels=None, title: str = "") -> Figure:
    """Rows of tokens (steps or samples) as coloured cells: grey special, white untouched, blue [MASK],
    orange random, green unchanged, purple selected-but-not-yet-replaced (codes -1, 0, 1, 2, 3, 4: see
    :func:`mlm_course.masking.display_codes`).

    ``shown`` are the tokens the model sees; where ``original`` differs, the original is written under it.
    """
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    rows = len(shown)
    if rows == 0 or len(codes) != rows or any(len(s) != len(c) for s, c in zip(shown, codes, strict=True)):
        raise ValueError("pass one code per shown token, row by row (and at least one row).")
    width = max(len(s) for s in shown)
    grid = np.full((rows, width), -1, dtype=int)
    for r, row in enumerate(codes):
        grid[r, : len(row)] = [int(c) for c in row]
    if not set(np.unique(grid)) <= set(MASK_GRID_COLORS):
        raise ValueError(f"codes must be among {sorted(MASK_GRID_COLORS)}.")
    cmap = ListedColormap([MASK_GRID_COLORS[k][0] for k in sorted(MASK_GRID_COLORS)])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.95 * width + 1.5), 0.55 * rows + 1.7), layout="constrained")
    _ = ax.imshow(grid, cmap=cmap, vmin=-1.5, vmax=4.5, aspect="auto")
    for r in range(rows):
        for c, tok in enumerate(shown[r]):
            dark = grid[r, c] in (1, 2, 3, 4)
            orig = None if original is None else original[r][c]
            text = tok if orig is None or orig == tok else f"{tok}\n({orig})"
            _ = ax.text(c, r, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(np.arange(width) - 0.5, minor=True)
    ax.set_yticks(np.arange(rows) - 0.5, minor=True)
    ax.grid(which="minor", color="black", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    ax.set_xticks(range(width), [str(i) for i in range(width)], fontsize=7)
    ax.set_yticks(range(rows), row_labels if row_labels is not None else [str(r) for r in range(rows)])
    ax.set_xlabel("position")
    handles = [Patch(facecolor=col, edgecolor="black", label=name) for col, name in MASK_GRID_COLORS.values()]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    if title:
        ax.set_title(title)
    return fig


def masks_per_sequence_hist(counts: dict, *, title: str = "") -> Figure:
    """Side-by-side bars: how many positions each scheme selects per sequence (``{scheme: counts per row}``)."""
    import numpy as np

    if not counts or any(len(v) == 0 for v in counts.values()):
        raise ValueError("pass {scheme name: number of selected positions per sequence}, none empty.")
    arrays = {name: np.asarray(v, dtype=int) for name, v in counts.items()}
    top = max(int(a.max()) for a in arrays.values())
    xs = np.arange(top + 1)
    width = 0.8 / len(arrays)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (name, a) in enumerate(arrays.items()):
        share = np.bincount(a, minlength=top + 1) / len(a)
        _ = ax.bar(xs + (i - (len(arrays) - 1) / 2) * width, share, width, label=name)
    ax.set_xticks(xs)
    ax.set_xlabel("selected positions in the sequence")
    ax.set_ylabel("fraction of sequences")
    ax.legend()
    ax.set_title(title or "Positions selected per sequence")
    fig.tight_layout()
    return fig


def rates_vs_targets(rates: dict, targets: dict, *, confidence: float = 0.999) -> Figure:
    """Measured minus target, in percentage points, with the measurement's interval as an error bar.

    ``rates``: ``{name: {"rate", "low", "high", ...}}`` (as :func:`mlm_course.masking.measure_rates` returns);
    ``targets``: ``{name: target rate}``. A bar crossing the zero line means the target is inside the interval.
    """
    import numpy as np

    names = [n for n in rates if n in targets]
    if not names:
        raise ValueError("rates and targets share no name: use the keys of measure_rates(...), e.g. 'selected'.")
    diff = np.array([100 * (rates[n]["rate"] - targets[n]) for n in names])
    low = np.array([100 * (rates[n]["rate"] - rates[n]["low"]) for n in names])
    high = np.array([100 * (rates[n]["high"] - rates[n]["rate"]) for n in names])
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ys = np.arange(len(names))[::-1]
    _ = ax.errorbar(diff, ys, xerr=np.vstack([low, high]), fmt="o", capsize=5, color="tab:blue")
    _ = ax.axvline(0, color="black", lw=1)
    labels = [f"{n}: {100 * rates[n]['rate']:.2f} % (target {100 * targets[n]:g} %)" for n in names]
    ax.set_yticks(ys, labels)
    span = max(float(np.max(np.abs(diff) + np.maximum(low, high))), 0.05) * 1.3
    ax.set_xlim(-span, span)
    ax.set_xlabel(f"measured − target (percentage points), {100 * confidence:g} % interval")
    ax.set_title("Measured rates against their targets")
    fig.tight_layout()
    return fig


def distinct_masks_plot(epochs, curves: dict) -> Figure:
    """Distinct masked versions of a sequence seen after each epoch, one line per strategy."""
    if not curves or any(len(v) != len(epochs) for v in curves.values()):
        raise ValueError("pass one value per epoch for every curve.")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, values in curves.items():
        _ = ax.plot(list(epochs), list(values), marker="o", ms=3, label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel("distinct masks seen so far")
    ax.legend()
    ax.set_title("Static vs dynamic masking")
    fig.tight_layout()
    return fig


# ---- 05_objective --------------------------------------------------------------------------------------------


def joint_vs_product(joint, product, first_labels, second_labels, *, title: str = "") -> Figure:
    """Two heatmaps with the values written in: the true joint p(a, b) of two masked tokens and the product of
    marginals p(a)·p(b) that a model predicting each token separately gives."""
    import numpy as np

    joint, product = np.asarray(joint, dtype=float), np.asarray(product, dtype=float)
    if joint.shape != product.shape or joint.shape != (len(first_labels), len(second_labels)):
        raise ValueError("joint and product must both be (len(first_labels), len(second_labels)) tables.")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
    for ax, table, name in zip(axes, (joint, product), ("joint p(a, b)", "product p(a) · p(b)"), strict=True):
        _ = ax.imshow(table, cmap="Blues", vmin=0, vmax=max(joint.max(), product.max()))
        for (r, c), value in np.ndenumerate(table):
            _ = ax.text(c, r, f"{value:.2f}", ha="center", va="center", color="white" if value > 0.3 else "black")
        ax.set_xticks(range(len(second_labels)), list(second_labels))
        ax.set_yticks(range(len(first_labels)), list(first_labels))
        ax.set_xlabel("second masked token b")
        ax.set_ylabel("first masked token a")
        ax.set_title(name)
    if title:
        fig.suptitle(title)
    return fig


def loss_by_action_bars(results: dict, *, metric: str = "loss", title: str = "") -> Figure:
    """Grouped bars: ``metric`` at the [MASK], random and unchanged positions (and all), one colour per model.

    ``results``: ``{model name: mlm_course.objective.evaluate_by_action(...)}``.
    """
    import numpy as np

    if not results:
        raise ValueError("pass at least one model's results.")
    groups = list(next(iter(results.values())).keys())
    width = 0.8 / len(results)
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for k, (name, res) in enumerate(results.items()):
        values = [res[g][metric] for g in groups]
        bars = ax.bar(np.arange(len(groups)) + (k - (len(results) - 1) / 2) * width, values, width, label=name)
        _ = ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(range(len(groups)), [f"{g}\n({next(iter(results.values()))[g]['tokens']} tokens)" for g in groups])
    ax.set_xlabel("positions (label ≠ −100), by what the input showed there")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    ax.set_title(title or f"{metric} at the predicted positions")
    fig.tight_layout()
    return fig


def pll_pairs_plot(good, bad, *, title: str = "") -> Figure:
    """Each sentence pair as a point (PLL of the scrambled one, PLL of the grammatical one); above the diagonal the
    grammatical sentence scores higher."""
    good, bad = [float(x) for x in good], [float(x) for x in bad]
    if len(good) != len(bad) or not good:
        raise ValueError("pass one PLL of a scrambled sentence per grammatical one (and at least one pair).")
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    wins = [g > b for g, b in zip(good, bad, strict=True)]
    _ = ax.scatter([b for b, w in zip(bad, wins, strict=True) if w], [g for g, w in zip(good, wins, strict=True) if w],
                   color="tab:green", label="grammatical higher")
    _ = ax.scatter([b for b, w in zip(bad, wins, strict=True) if not w],
                   [g for g, w in zip(good, wins, strict=True) if not w], color="tab:red", marker="x",
                   label="scrambled higher")
    low, high = min(good + bad), max(good + bad)
    pad = 0.05 * (high - low or 1)
    _ = ax.plot([low - pad, high + pad], [low - pad, high + pad], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("PLL of the scrambled sentence (nats)")
    ax.set_ylabel("PLL of the grammatical sentence (nats)")
    ax.legend(fontsize=8)
    ax.set_title(title or f"grammatical higher in {sum(wins)} of {len(wins)} pairs")
    fig.tight_layout()
    return fig


# ---- 06_pretraining ------------------------------------------------------------------------------------------


def pretraining_curves(metrics: list[dict], *, baseline: dict | None = None, title: str = "") -> Figure:
    """Training loss (per log interval) and held-out loss / top-1 / top-5 by step, with the unigram baseline.

    Rows with a ``stage`` number (joined runs of continued pretraining) get a dotted line where each later stage starts.
    """
    train = [m for m in metrics if m["split"] == "train"]
    evals = [m for m in metrics if m["split"] == "eval"]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 3.8))
    for before, after in zip(metrics, metrics[1:], strict=False):
        if after.get("stage", 1) != before.get("stage", 1):
            for ax in (ax_loss, ax_acc):
                ax.axvline(before["step"], color="black", ls=":", lw=1)
            ax_loss.annotate(f"stage {after['stage']}", (before["step"], 1), xycoords=("data", "axes fraction"),
                             xytext=(3, -12), textcoords="offset points", fontsize=8)
    ax_loss.plot([m["step"] for m in train], [m["loss"] for m in train], lw=0.8, alpha=0.6, label="training batches")
    ax_loss.plot([m["step"] for m in evals], [m["loss"] for m in evals], "o-", label="held-out (frozen masks)")
    for metric, style in (("top1", "o-"), ("top5", "s-")):
        ax_acc.plot([m["step"] for m in evals], [m[metric] for m in evals], style, label=f"model {metric}")
    if baseline is not None:
        ax_loss.axhline(baseline["loss"], color="gray", ls="--", label="unigram frequencies")
        for metric, color in (("top1", "C0"), ("top5", "C1")):
            ax_acc.axhline(baseline[metric], color=color, ls="--", lw=1, label=f"unigram {metric}")
    ax_loss.set(xlabel="optimiser step", ylabel="masked-token cross-entropy (nats)", title=title or "loss")
    ax_acc.set(xlabel="optimiser step", ylabel="held-out accuracy on masked tokens", title="accuracy")
    ax_loss.legend(fontsize=8)
    ax_acc.legend(fontsize=8)
    fig.tight_layout()
    return fig


def fill_mask_bars(rows: list[tuple[str, list[tuple[str, float]], set[str]]], *, columns: int = 3) -> Figure:
    """One small bar chart per sentence: the top-k guesses and their probabilities; accepted answers in green."""
    n_rows = -(-len(rows) // columns)
    fig, axes = plt.subplots(n_rows, columns, figsize=(4.2 * columns, 2.1 * n_rows), squeeze=False)
    for ax, (text, guesses, answers) in zip(axes.flat, rows, strict=False):
        tokens = [t for t, _ in guesses][::-1]
        probs = [p for _, p in guesses][::-1]
        ax.barh(tokens, probs, color=["tab:green" if t in answers else "tab:gray" for t in tokens])
        ax.set_title(text if len(text) <= 45 else text[:42] + "…", fontsize=8)
        ax.set_xlim(0, 1)
        ax.tick_params(labelsize=8)
    for ax in axes.flat[len(rows):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def accuracy_by_frequency(buckets: list[dict], *, title: str = "") -> Figure:
    """Top-1 accuracy of the model and of unigram frequencies, per training-frequency bucket of the true token."""
    labels = [b["bucket"] for b in buckets]
    x = range(len(buckets))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([i - 0.2 for i in x], [b["model_top1"] for b in buckets], width=0.4, label="model")
    ax.bar([i + 0.2 for i in x], [b["unigram_top1"] for b in buckets], width=0.4, label="unigram frequencies")
    ax.set_xticks(list(x), [f"{label}\n({b['tokens']:,} tokens)" for label, b in zip(labels, buckets, strict=True)],
                  fontsize=8)
    ax.set(ylabel="top-1 accuracy", title=title or "which masked tokens the model gets right")
    ax.legend()
    fig.tight_layout()
    return fig


# ---- 07_fine_tuning ------------------------------------------------------------------------------------------


def confusion_matrix_plot(confusion, names=("negative", "positive"), *, title: str = "") -> Figure:
    """The confusion matrix (rows: true class, columns: predicted class) with counts and row shares written in."""
    import numpy as np

    table = np.asarray(confusion, dtype=float)
    if table.ndim != 2 or table.shape[0] != table.shape[1] or table.shape[0] != len(names):
        raise ValueError("pass a square confusion matrix with one row and one column per class name.")
    shares = table / np.maximum(table.sum(1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(3.8, 3.4), layout="constrained")
    _ = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    for (r, c), count in np.ndenumerate(table):
        _ = ax.text(c, r, f"{int(count)}\n({shares[r, c]:.0%})", ha="center", va="center",
                    color="white" if shares[r, c] > 0.5 else "black")
    ax.set_xticks(range(len(names)), list(names))
    ax.set_yticks(range(len(names)), list(names))
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title or f"accuracy {np.trace(table) / max(table.sum(), 1):.1%}")
    return fig


def finetune_curves(metrics, *, title: str = "") -> Figure:
    """Left: training loss over optimiser steps (and dev loss); right: dev accuracy, the best one marked."""
    train = [m for m in metrics if m["split"] == "train"]
    dev = [m for m in metrics if m["split"] == "dev"]
    if not train:
        raise ValueError("no training rows in the metrics: pass the metrics of a fit (split == 'train').")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.3), layout="constrained")
    _ = left.plot([m["step"] for m in train], [m["loss"] for m in train], label="train (running mean)")
    if dev:
        _ = left.plot([m["step"] for m in dev], [m["loss"] for m in dev], "o-", label="dev")
        best = max(dev, key=lambda m: (m["accuracy"], -m["loss"]))
        _ = right.plot([m["step"] for m in dev], [m["accuracy"] for m in dev], "o-", color="C1")
        _ = right.plot([best["step"]], [best["accuracy"]], "*", ms=14, color="C3",
                       label=f"best: {best['accuracy']:.1%} at step {best['step']}")
        right.legend(loc="lower right")
    left.set_xlabel("optimiser step")
    left.set_ylabel("cross-entropy (nats)")
    left.legend()
    right.set_xlabel("optimiser step")
    right.set_ylabel("dev accuracy")
    fig.suptitle(title or "Fine-tuning")
    return fig


def comparison_bars(rows, *, title: str = "") -> Figure:
    """Test accuracy and F1 per model (rows: dicts with "label", "accuracy", "f1"; None = not run), side by side."""
    import numpy as np

    if not rows:
        raise ValueError("no rows to plot: pass one dict per model.")
    labels = [r["label"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(rows) + 1.4), layout="constrained")
    ys = np.arange(len(rows))[::-1]
    for offset, key, color in ((0.2, "accuracy", "C0"), (-0.2, "f1", "C2")):
        values = [r.get(key) for r in rows]
        ran = [v is not None for v in values]
        _ = ax.barh(ys[ran] + offset, [v for v in values if v is not None], height=0.38, color=color,
                    label=f"test {'F1' if key == 'f1' else key}")
        for y, v in zip(ys + offset, values, strict=True):
            _ = ax.text((v or 0.5) + 0.005, y, f"{v:.1%}" if v is not None else "not run", va="center", fontsize=8)
    _ = ax.axvline(0.5, color="grey", ls=":", lw=1)
    ax.set_yticks(ys, labels)
    ax.set_xlim(0.4, 1.0)
    ax.set_xlabel("test score (model chosen on dev)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or "Movie-review sentiment: what pretraining buys")
    return fig


# ---- 08_ablations --------------------------------------------------------------------------------------------


ABLATION_METRICS = (
    ("heldout_loss", "held-out masked-LM loss\n(15 % 80/10/10 masks, lower is better)", 1.0),
    ("finetune_acc", "fine-tuned sentiment\ntest accuracy (%)", 100.0),
    ("probe_acc", "frozen-feature probe\ntest accuracy (%)", 100.0),
)


def ablation_panels(summary: list[dict], family: str, *, title: str = "") -> Figure:
    """One panel per metric: mean ± std over seeds for each variant of ``family`` (summary lines of
    :func:`mlm_course.ablations.summarise`), each seed as a grey cross when given (``"values"``)."""
    import numpy as np

    lines = [line for line in summary if line["family"] == family and line["seeds"] > 0]
    if not lines:
        raise ValueError(f"no finished runs of the {family!r} family in this summary: run the grid first.")
    fig, axes = plt.subplots(1, len(ABLATION_METRICS), figsize=(12, 0.45 * len(lines) + 1.8), layout="constrained")
    ys = np.arange(len(lines))[::-1]
    for ax, (name, label, scale) in zip(axes, ABLATION_METRICS, strict=True):
        means = np.array([line[name][0] for line in lines]) * scale
        stds = np.array([line[name][1] for line in lines]) * scale
        _ = ax.errorbar(means, ys, xerr=stds, fmt="o", color="C0", capsize=4, label="mean ± std over seeds")
        for y, line in zip(ys, lines, strict=True):
            values = np.asarray(line.get("values", {}).get(name, []), dtype=float) * scale
            _ = ax.plot(values, np.full(len(values), y - 0.2), "x", color="grey", ms=4)
        _ = ax.axhline(ys[0], color="C1", lw=0.8, ls=":")  # the first variant is BERT's recipe
        ax.set_yticks(ys, [line["label"] for line in lines] if ax is axes[0] else [""] * len(lines))
        ax.set_xlabel(label)
        ax.margins(x=0.25)
    axes[0].legend(loc="lower left", fontsize=7)
    fig.suptitle(title or f"Masking ablation: {family}")
    return fig
