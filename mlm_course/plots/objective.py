"""Figures of 05_objective: joint vs product of marginals, loss by masking action, PLL pairs."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised, mark_as_data
from mlm_course.plots.style import OKABE_ITO, SERIES_COLORS


@localised
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
        mark_as_data(ax.xaxis, ax.yaxis)
        ax.set_xlabel("second masked token b")
        ax.set_ylabel("first masked token a")
        ax.set_title(name)
    if title:
        fig.suptitle(title)
    return fig


ACTION_METRIC_LABELS = {"loss": "cross-entropy (nats)", "top1": "top-1 accuracy", "mask": "share predicting [MASK]",
                        "copy": "share copying the shown token"}


@localised
def loss_by_action_bars(results: dict, *, metric: str = "loss", title: str = "") -> Figure:
    """Grouped bars: ``metric`` at the [MASK], random and unchanged positions (and all), one colour per model.

    ``results``: ``{model name: mlm_course.objective_bug.evaluate_by_action(...)}``. For the loss, a ``loss_ci95``
    entry (half-width of a 95 % interval over the scored tokens) is drawn as an error bar.
    """
    import numpy as np

    if not results:
        raise ValueError("pass at least one model's results.")
    groups = list(next(iter(results.values())).keys())
    width = 0.8 / len(results)
    fig, ax = plt.subplots(figsize=(9.5, 3.8))
    for k, (name, res) in enumerate(results.items()):
        values = [res[g][metric] for g in groups]
        errors = [res[g].get(f"{metric}_ci95", 0.0) for g in groups]
        bars = ax.bar(np.arange(len(groups)) + (k - (len(results) - 1) / 2) * width, values, width, label=name,
                      color=SERIES_COLORS[k % len(SERIES_COLORS)], yerr=errors if any(errors) else None, capsize=3)
        _ = ax.bar_label(bars, fmt="%.2f", fontsize=9, padding=2)
    ax.set_xticks(range(len(groups)), [f"{g}\n({next(iter(results.values()))[g]['tokens']} tokens)" for g in groups])
    ax.set_xlabel("positions (label ≠ −100), by what the input showed there")
    ax.set_ylabel(ACTION_METRIC_LABELS.get(metric, metric))
    ax.margins(y=0.12)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="trained", title_fontsize=9)
    ax.set_title(title or f"{metric} at the predicted positions")
    fig.tight_layout()
    return fig


_RUN_STYLES = ("-", "--", "-.", ":")  # the k-th run's line style and marker; widths fall with k, so a later run
_RUN_MARKERS = ("", "s", "^", "D")  # drawn on an earlier one leaves it visible on both sides


@localised
def training_loss_curves(histories: dict, *, heldout: dict | None = None, unigram: float | dict | None = None,
                         title: str = "") -> Figure:
    """Each run's training loss (on its own labels) by step: one colour, line style and width per run, later runs
    thinner and on top, so equal curves stay visible. ``heldout`` (``{run: loss}``) adds each run's held-out loss on
    correct labels as a ring at its last step (rings shrink run by run, so equal losses show as concentric rings);
    ``unigram`` (a loss, or :func:`mlm_course.pretraining.unigram_baseline`'s dict) is drawn as a labelled line.

    ``histories``: ``{run name: Trained.history}`` (rows with ``split == "train"`` are plotted).
    """
    if not histories:
        raise ValueError("pass at least one run's metrics: {name: mlm_course.train.train(...).history}.")
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for k, (name, rows) in enumerate(histories.items()):
        train = [m for m in rows if m["split"] == "train"]
        if not train:
            raise ValueError(f"run {name!r} has no training rows: pass the metrics of a training run.")
        color, label = SERIES_COLORS[k % len(SERIES_COLORS)], name
        if heldout is not None and name in heldout:
            label = f"{name} (held-out {heldout[name]:.2f})"
        _ = ax.plot([m["step"] for m in train], [m["loss"] for m in train], _RUN_STYLES[k % len(_RUN_STYLES)],
                    marker=_RUN_MARKERS[k % len(_RUN_MARKERS)], ms=5, color=color, lw=max(1.2, 3.6 - 0.9 * k),
                    zorder=2 + k, label=label)
        if heldout is not None and name in heldout:
            _ = ax.plot([train[-1]["step"]], [heldout[name]], "o", ms=max(5.0, 15.0 - 4.5 * k), mfc="none",
                        mew=2, color=color, zorder=10 + k, label="_held-out", clip_on=False)
    if unigram is not None:
        level = float(unigram["loss"] if isinstance(unigram, dict) else unigram)
        _ = ax.axhline(level, color="black", ls=":", lw=1.4, zorder=1,
                       label=f"unigram frequencies,\nheld-out ({level:.2f})")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("masked-LM loss (nats)")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title="line: training loss\n(its own labels)\n○ : held-out loss\n(correct labels)", title_fontsize=9,
              alignment="left")
    ax.set_title(title or "training loss by step")
    fig.tight_layout()
    return fig


@localised
def pll_pairs_plot(good, bad, *, title: str = "") -> Figure:
    """Each sentence pair as a point (PLL of the scrambled one, PLL of the grammatical one); above the diagonal the
    grammatical sentence scores higher."""
    good, bad = [float(x) for x in good], [float(x) for x in bad]
    if len(good) != len(bad) or not good:
        raise ValueError("pass one PLL of a scrambled sentence per grammatical one (and at least one pair).")
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    wins = [g > b for g, b in zip(good, bad, strict=True)]
    _ = ax.scatter([b for b, w in zip(bad, wins, strict=True) if w], [g for g, w in zip(good, wins, strict=True) if w],
                   color=OKABE_ITO["bluish green"], label="grammatical higher")
    _ = ax.scatter([b for b, w in zip(bad, wins, strict=True) if not w],
                   [g for g, w in zip(good, wins, strict=True) if not w], color=OKABE_ITO["vermillion"], marker="x",
                   label="scrambled higher")
    low, high = min(good + bad), max(good + bad)
    pad = 0.05 * (high - low or 1)
    _ = ax.plot([low - pad, high + pad], [low - pad, high + pad], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("PLL of the scrambled sentence (nats)")
    ax.set_ylabel("PLL of the grammatical sentence (nats)")
    ax.legend(fontsize=9)
    ax.set_title(title or f"grammatical higher in {sum(wins)} of {len(wins)} pairs")
    fig.tight_layout()
    return fig
