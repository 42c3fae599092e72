"""Figures of 07_fine_tuning: confusion matrix, fine-tuning curves, model comparison, label efficiency."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised
from mlm_course.plots.style import OKABE_ITO


@localised
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


def _room_for_markers(ax, values: list[float], *, pad: float = 0.08) -> None:
    """y limits that hold every value with ``pad`` of their range (at least 0.01) above and below, so that no
    marker (the best point's star included) is cut by the frame."""
    low, high = min(values), max(values)
    margin = max(pad * (high - low), 0.01)
    ax.set_ylim(low - margin, high + margin)


@localised
def finetune_curves(metrics, *, title: str = "") -> Figure:
    """Left: training loss (a point per log interval: the mean loss of the steps since the previous point) and dev
    loss; right: dev accuracy, the best one starred. Every point is a marker; the legend under the panels says what
    each kind is, and the y limits hold every marker."""
    train = [m for m in metrics if m["split"] == "train"]
    dev = [m for m in metrics if m["split"] == "dev"]
    if not train:
        raise ValueError("no training rows in the metrics: pass the metrics of a fit (split == 'train').")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.9), layout="constrained")
    _ = left.plot([m["step"] for m in train], [m["loss"] for m in train], "s-", ms=5, color=OKABE_ITO["blue"],
                  label="train: mean loss of the steps since the previous point")
    losses = [m["loss"] for m in train]
    if dev:
        _ = left.plot([m["step"] for m in dev], [m["loss"] for m in dev], "o-", color=OKABE_ITO["orange"],
                      label="dev: loss and accuracy at an evaluation")
        losses += [m["loss"] for m in dev]
        best = max(dev, key=lambda m: (m["accuracy"], -m["loss"]))
        _ = right.plot([m["step"] for m in dev], [m["accuracy"] for m in dev], "o-", color=OKABE_ITO["orange"],
                       label="_dev accuracy")
        _ = right.plot([best["step"]], [best["accuracy"]], "*", ms=14, color=OKABE_ITO["vermillion"], zorder=3,
                       label=f"best: {best['accuracy']:.1%} at step {best['step']}")
        _room_for_markers(right, [m["accuracy"] for m in dev])
    _room_for_markers(left, losses)
    for ax in (left, right):
        ax.margins(x=0.06)
        ax.set_xlabel("optimiser step")
    left.set_ylabel("cross-entropy (nats)")
    right.set_ylabel("dev accuracy")
    right.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:.0%}"))
    handles = [line for ax in (left, right) for line in ax.lines if not line.get_label().startswith("_")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(title or "Fine-tuning")
    return fig


@localised
def comparison_dots(rows, *, chance: float = 0.5, confidence: float = 0.95, title: str = "") -> Figure:
    """Test accuracy per model as a dot with its Wilson ``confidence`` interval over the test sentences, on an axis
    that starts at ``chance`` (drawn and named). Rows: dicts with "label", "accuracy" and "examples" (the number of
    test sentences); accuracy None = not run, written in the row."""
    import numpy as np

    from mlm_course.statistics import wilson_interval

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
        low, high = wilson_interval(round(accuracy * row["examples"]), row["examples"], confidence)
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
    "tapt": ("course checkpoint + MLM on the review training text", OKABE_ITO["sky blue"], "D"),
    "minilm": ("MiniLM-L6 (distilled + contrastive, not MLM)", OKABE_ITO["bluish green"], "^"),
    "bow": ("bag of words (TF-IDF + logistic regression)", OKABE_ITO["orange"], "v"),
    "bow_pairs": ("bag of words and word pairs (TF-IDF + logistic regression)", OKABE_ITO["black"], "<"),
    "course_pll": ("course PLL numbers + logistic regression", OKABE_ITO["reddish purple"], "P"),
    "bigram": ("word bigrams (counts)", OKABE_ITO["orange"], "s"),
    "trigram": ("word trigrams (counts)", OKABE_ITO["reddish purple"], "s"),
}


#: the zero-shot scorers of notebook 07 (mlm_course.lab.label_grid.zero_shot_table), as the figure names them
ZERO_SHOT_NAMES = {"course": "course checkpoint (PLL)", "random": "random init (PLL)", "minilm": "MiniLM (PLL)",
                   "bigram": "word bigrams (counts)", "trigram": "word trigrams (counts)"}
#: where the word-order pairs come from (mlm_course.word_order: split("test") and review_split())
DOMAIN_NAMES = {"heldout": "held-out corpus", "reviews": "movie reviews"}


def _keep_texts_inside(ax, texts, *, room_pt: float = 3.0, tries: int = 3) -> None:
    """Lower the bottom of ``ax``'s y axis until every text in ``texts`` (drawn under the points they name) lies
    inside the axes, ``room_pt`` above the frame."""
    fig = ax.figure
    for _ in range(tries):
        fig.draw_without_rendering()
        box = ax.get_window_extent()
        lowest = min(text.get_window_extent().y0 for text in texts)
        short = box.y0 + room_pt * fig.dpi / 72 - lowest  # pixels the lowest text runs under the frame
        if short <= 0:
            return
        bottom, top = ax.get_ylim()
        ax.set_ylim(bottom - short / box.height * (top - bottom) * 1.05, top)


@localised
def label_efficiency_curves(summary: dict, *, zero_shot: dict | None = None, title: str = "",
                            chance: float = 0.5) -> Figure:
    """Test accuracy against the number of training labels (log x), one line per model with its 95 % t-interval
    over seeds; ``summary`` is :func:`mlm_course.label_efficiency.summarise`'s output (the largest ``n_train`` is
    "every label"); where runs collapsed to one class, "k/n collapsed" is written under the budget's intervals in
    the model's colour, one line per model; ``zero_shot`` ({key: {"accuracy", "low", "high"}}) is drawn as a band:
    no labels at all. The legend sits under the axes."""
    if not summary:
        raise ValueError("nothing to plot: summarise() found no runs for this task")
    all_labels = max(e["n_train"] for entries in summary.values() for e in entries)
    fig, ax = plt.subplots(figsize=(9.6, 6.0), layout="constrained")
    collapsed: dict[int, list[tuple[str, str]]] = {}  # budget -> [(text, colour)] in the order of the models
    lows: dict[int, float] = {}  # budget -> the lowest end of an interval drawn there (or chance)
    for i, (key, entries) in enumerate(summary.items()):
        label, colour, marker = PAYOFF_MODELS.get(key, (key, "#555555", "o"))
        entries = sorted(entries, key=lambda e: e["n_train"])
        shift = 10 ** (0.015 * (i - (len(summary) - 1) / 2))  # a small sideways shift keeps the intervals apart
        xs = [e["n_train"] * shift for e in entries]
        means = [e["mean"] for e in entries]
        errors = [[m - e["low"] for m, e in zip(means, entries, strict=True)],
                  [e["high"] - m for m, e in zip(means, entries, strict=True)]]
        _ = ax.errorbar(xs, means, yerr=errors, fmt=f"{marker}-", color=colour, capsize=3, ms=5, label=label)
        for e in entries:
            lows[e["n_train"]] = min(lows.get(e["n_train"], chance), e["low"], e["mean"])
            if e["collapsed"]:  # runs stuck at one class are in the mean: say how many
                collapsed.setdefault(e["n_train"], []).append((f"{e['collapsed']}/{e['runs']} collapsed", colour))
    notes = []
    floor = min(lows.values(), default=chance)
    for n_train, lines in collapsed.items():  # one row under the lowest interval, stacked, centred on the budget
        for row, (text, colour) in enumerate(lines):
            notes.append(ax.annotate(text, (n_train, floor), xytext=(0, -4 - 12 * row),
                                     textcoords="offset points", ha="center", va="top", fontsize=9, color=colour))
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
    ax.set_ylabel("test accuracy\n(mean of seeds, 95 % t-interval)")
    fig.legend(fontsize=9, loc="outside lower center", ncol=2, frameon=False)
    fig.suptitle(title, fontsize=11)
    if notes:
        _keep_texts_inside(ax, notes)
    return fig


@localised
def label_efficiency_differences(comparisons: list[dict], *, title: str = "") -> Figure:
    """Model − baseline test accuracy against the number of training labels, one line per comparison
    (``comparisons`` from :func:`mlm_course.label_efficiency.compared`, one task): each budget's mean difference over
    the paired seeds with its 95 % t-interval; the legend gives the comparison's one test — in how many paired runs
    the model was ahead, and the sign test's p after Holm's correction. The zero line is "no difference". The legend sits under the axes, and
    the axes are tall enough for the two-line y label, which stays clear of the title."""
    if not comparisons:
        raise ValueError("nothing to plot: pass the output of label_efficiency.compared() for one task")
    fig, ax = plt.subplots(figsize=(8.6, 5.6), layout="constrained")
    all_labels = max(e["n_train"] for c in comparisons for e in c["by_budget"])
    for i, comparison in enumerate(comparisons):
        entries = comparison["by_budget"]
        shift = 10 ** (0.02 * (i - (len(comparisons) - 1) / 2))
        colour = PAYOFF_MODELS.get(comparison["model"], (comparison["model"], "#555555", "o"))[1]
        means = [100 * e["mean_difference"] for e in entries]
        errors = [[m - 100 * e["low"] for m, e in zip(means, entries, strict=True)],
                  [100 * e["high"] - m for m, e in zip(means, entries, strict=True)]]
        verdict = "a difference" if comparison["detected"] else "not detected"
        label = (f"{comparison['model']} − {comparison['baseline']}: ahead in {comparison['ahead']} of "
                 f"{comparison['runs']} runs, p = {comparison['adjusted_p']:.2g} after Holm ({verdict})")
        _ = ax.errorbar([e["n_train"] * shift for e in entries], means, yerr=errors, fmt="o-", color=colour,
                        capsize=3, lw=1.2, ms=6, mfc=colour if comparison["detected"] else "white", label=label)
    _ = ax.axhline(0, color="#555555", ls="--", lw=1, label="no difference")
    ax.set_xscale("log")
    budgets = sorted({e["n_train"] for c in comparisons for e in c["by_budget"]})
    ax.set_xticks(budgets, [f"{n:,}" for n in budgets])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlabel(f"training labels (log scale; the last point is every label, {all_labels:,})")
    ax.set_ylabel("difference in test accuracy\n(points; mean over seeds, 95 % t-interval)")
    fig.legend(fontsize=9, loc="outside lower center", frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig


@localised
def zero_shot_word_order(table: dict[str, dict[str, dict]], comparisons: list[dict], *, title: str = "") -> Figure:
    """Zero-shot word order per domain: left, each scorer's accuracy with its 95 % Wilson interval from the chance
    line; right, the reference (the course checkpoint) minus each scorer on the same pairs, with the paired
    bootstrap 95 % interval, filled where the exact McNemar test survives Holm's correction (``comparisons`` from
    :func:`mlm_course.label_efficiency.zero_shot_comparisons`), its value in points written above it. One legend
    under both panels, covering no point."""
    domains = list(table)
    scorers = list(dict.fromkeys(s for d in domains for s in table[d]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 0.6 + 0.5 * len(scorers) * len(domains)), sharey=True,
                                      layout="constrained")
    rows = [(d, s) for d in domains for s in scorers if s in table[d]]
    names = [f"{ZERO_SHOT_NAMES.get(s, s)}, {DOMAIN_NAMES.get(d, d)}" for d, s in rows]
    for y, (domain, scorer) in enumerate(rows):
        result = table[domain][scorer]
        colour = PAYOFF_MODELS.get(scorer, (scorer, "#555555", "o"))[1]
        _ = left.errorbar([100 * result["accuracy"]], [y], xerr=[[100 * (result["accuracy"] - result["low"])],
                          [100 * (result["high"] - result["accuracy"])]], fmt="o", color=colour, capsize=3)
        test = next((t for t in comparisons if (t["domain"], t["scorer"]) == (domain, scorer)), None)
        if test is not None:
            m = 100 * test["mean_difference"]
            _ = right.errorbar([m], [y], xerr=[[m - 100 * test["low"]], [100 * test["high"] - m]], fmt="o",
                               color=colour, capsize=3, mfc=colour if test["detected"] else "white")
            _ = right.annotate(f"{m:+.1f}", (m, y), xytext=(0, 5), textcoords="offset points", ha="center",
                               va="bottom", fontsize=9, color=colour)
    _ = left.axvline(50, color="#555555", ls="--", lw=1, label="chance (50%)")
    _ = right.axvline(0, color="#555555", ls="--", lw=1, label="no difference")
    _ = right.plot([], [], "o", color="#555555", label="filled: McNemar, after Holm, p < 0.05")
    _ = right.plot([], [], "o", color="#555555", mfc="white", label="hollow: not detected")
    left.set_yticks(range(len(rows)), names)
    left.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top, half a row of room round every point
    left.set_xlabel("pairs where the real sentence\nscores higher (%, 95 % Wilson)")
    right.set_xlabel("course checkpoint minus this scorer\n(points, same pairs, paired bootstrap 95 %)")
    handles = [line for ax in (left, right) for line in ax.lines if line.get_label() in (
        "chance (50%)", "no difference", "filled: McNemar, after Holm, p < 0.05", "hollow: not detected")]
    fig.legend(handles=handles, fontsize=9, loc="outside lower center", ncol=2, frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig
