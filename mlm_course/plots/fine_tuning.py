"""Figures of 07_fine_tuning: confusion matrix, fine-tuning curves, model comparison, label efficiency."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.style import OKABE_ITO


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
    _ = left.plot([m["step"] for m in train], [m["loss"] for m in train], color=OKABE_ITO["blue"],
                  label="train (running mean)")
    if dev:
        _ = left.plot([m["step"] for m in dev], [m["loss"] for m in dev], "o-", color=OKABE_ITO["orange"], label="dev")
        best = max(dev, key=lambda m: (m["accuracy"], -m["loss"]))
        _ = right.plot([m["step"] for m in dev], [m["accuracy"] for m in dev], "o-", color=OKABE_ITO["orange"])
        _ = right.plot([best["step"]], [best["accuracy"]], "*", ms=14, color=OKABE_ITO["vermillion"],
                       label=f"best: {best['accuracy']:.1%} at step {best['step']}")
        right.legend(loc="lower right", fontsize=9)
    left.set_xlabel("optimiser step")
    left.set_ylabel("cross-entropy (nats)")
    left.legend(fontsize=9)
    right.set_xlabel("optimiser step")
    right.set_ylabel("dev accuracy")
    fig.suptitle(title or "Fine-tuning")
    return fig


def comparison_dots(rows, *, chance: float = 0.5, confidence: float = 0.95, title: str = "") -> Figure:
    """Test accuracy per model as a dot with its Wilson ``confidence`` interval over the test sentences, on an axis
    that starts at ``chance`` (drawn and named). Rows: dicts with "label", "accuracy" and "examples" (the number of
    test sentences); accuracy None = not run, written in the row."""
    import numpy as np

    from mlm_course.masking import binomial_interval

    if not rows:
        raise ValueError("no rows to plot: pass one dict per model.")
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.5), layout="constrained")
    ys = np.arange(len(rows))[::-1]
    for y, row in zip(ys, rows, strict=True):
        accuracy = row.get("accuracy")
        if accuracy is None:
            _ = ax.text(chance + 0.01, y, "not run", va="center", fontsize=9, style="italic", color="#555555")
            continue
        if not row.get("examples"):
            raise ValueError(f"row {row['label']!r} has no 'examples': give the number of test sentences.")
        low, high = binomial_interval(round(accuracy * row["examples"]), row["examples"], confidence)
        _ = ax.errorbar([accuracy], [y], xerr=[[accuracy - low], [high - accuracy]], fmt="o", ms=7, capsize=4,
                        color=OKABE_ITO["blue"])
        _ = ax.text(high + 0.008, y, f"{accuracy:.1%}", va="center", fontsize=9)
    _ = ax.axvline(chance, color=OKABE_ITO["vermillion"], ls="--", lw=1.2, label=f"chance ({chance:.0%})")
    ax.set_yticks(ys, [row["label"] for row in rows], fontsize=9)
    ax.set_xlim(chance - 0.02, 1.0)  # the axis starts at chance; a little room to see its line
    ax.set_ylim(ys.min() - 0.6, ys.max() + 0.6)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x:.0%}"))
    ax.set_xlabel(f"test accuracy (model chosen on dev), {confidence:.0%} Wilson interval")
    ax.legend(loc="lower right", fontsize=9)
    fig.suptitle(title or "Movie-review sentiment, test accuracy", fontsize=11)
    return fig


PAYOFF_MODELS = {  # model key of mlm_course.label_efficiency -> (label, colour, marker)
    "random": ("course architecture, random init", OKABE_ITO["vermillion"], "s"),
    "course": ("course checkpoint (MLM on Austen + Wikipedia)", OKABE_ITO["blue"], "o"),
    "dapt": ("course checkpoint + MLM on the review training text", OKABE_ITO["sky blue"], "D"),
    "minilm": ("MiniLM-L6 (distilled + contrastive, not MLM)", OKABE_ITO["bluish green"], "^"),
    "bow": ("bag of words (TF-IDF + logistic regression)", OKABE_ITO["orange"], "v"),
    "course_pll": ("course PLL numbers + logistic regression", OKABE_ITO["reddish purple"], "P"),
}


def label_efficiency_curves(summary: dict, *, zero_shot: dict | None = None, title: str = "",
                            chance: float = 0.5) -> Figure:
    """Test accuracy against the number of training labels (log x), one line per model with its 95 % t-interval
    over seeds; ``summary`` is :func:`mlm_course.label_efficiency.summarise`'s output (the largest ``n_train`` is
    "every label"); ``zero_shot`` ({key: {"accuracy", "low", "high"}}) is drawn as a band: no labels at all."""
    if not summary:
        raise ValueError("nothing to plot: summarise() found no runs for this task")
    all_labels = max(e["n_train"] for entries in summary.values() for e in entries)
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    for i, (key, entries) in enumerate(summary.items()):
        label, colour, marker = PAYOFF_MODELS.get(key, (key, "#555555", "o"))
        entries = sorted(entries, key=lambda e: e["n_train"])
        shift = 10 ** (0.015 * (i - (len(summary) - 1) / 2))  # a small sideways shift keeps the intervals apart
        xs = [e["n_train"] * shift for e in entries]
        means = [e["mean"] for e in entries]
        errors = [[m - e["low"] for m, e in zip(means, entries, strict=True)],
                  [e["high"] - m for m, e in zip(means, entries, strict=True)]]
        _ = ax.errorbar(xs, means, yerr=errors, fmt=f"{marker}-", color=colour, capsize=3, ms=5, label=label)
    for key, result in (zero_shot or {}).items():
        label, colour, _ = PAYOFF_MODELS.get(key, (key, "#555555", "o"))
        _ = ax.axhspan(result["low"], result["high"], color=colour, alpha=0.15, lw=0)
        _ = ax.text(45, result["accuracy"], f"zero-shot (no labels), {label.split(' (')[0]}: {result['accuracy']:.1%}",
                    fontsize=9, va="center", color=colour)
    _ = ax.axhline(chance, color="#555555", ls="--", lw=1, label=f"chance ({chance:.0%})")
    ax.set_xscale("log")
    budgets = sorted({e["n_train"] for entries in summary.values() for e in entries})
    ax.set_xticks(budgets, [f"{n:,}" for n in budgets])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlim(40, all_labels * 1.6)
    ax.set_ylim(min(chance - 0.03, ax.get_ylim()[0]), 1.0)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:.0%}"))
    ax.set_xlabel(f"training labels (log scale; the last point is every label, {all_labels:,})")
    ax.set_ylabel("test accuracy (mean of seeds, 95 % t-interval)")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(0, -0.16), ncol=2, frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig
