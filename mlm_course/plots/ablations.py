"""Figures of 08_ablations: one panel per metric per ablation family, held-out loss by action."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised
from mlm_course.plots.style import OKABE_ITO, SERIES_COLORS

ABLATION_METRICS = (
    ("heldout_loss", "held-out masked-LM loss (nats)\n(frozen 15 % 80/10/10 masks; lower is better)", 1.0),
    ("finetune_acc", "fine-tuned sentiment\ntest accuracy (%)", 100.0),
    ("probe_acc", "frozen-feature probe\ntest accuracy (%)", 100.0),
)
_REFERENCE_STYLE = {"unigram": {"color": OKABE_ITO["reddish purple"], "ls": "-.", "lw": 1.2},
                    "chance": {"color": OKABE_ITO["vermillion"], "ls": "--", "lw": 1.2}}


@localised
def ablation_panels(summary: list[dict], family: str, *, unigram_loss: float | None = None,
                    chance_accuracy: float | None = 0.5, confidence: float = 0.95, title: str = "") -> Figure:
    """One panel per metric for the variants of ``family`` (summary lines of :func:`mlm_course.ablations.summarise`):
    the mean over seeds with its ``confidence`` t-interval, each seed as a grey cross, and the reference levels
    (``unigram_loss`` on the loss panel, ``chance_accuracy`` on the accuracy panels) drawn and named.
    The ``rate`` family is drawn as metric against masking rate (lines); the others as one row per variant."""
    import numpy as np

    from mlm_course.statistics import mean_interval

    lines = [line for line in summary if line["family"] == family and line["seeds"] > 0]
    if not lines:
        raise ValueError(f"no finished runs of the {family!r} family in this summary: run the grid first.")
    along_rate = family == "rate"
    size = (9.8, 4.0) if along_rate else (9.8, 0.45 * len(lines) + 2.4)  # 9.8 in: a PNG within the 10-in column
    fig, axes = plt.subplots(1, len(ABLATION_METRICS), figsize=size, layout="constrained")
    positions = np.array([100 * line["mask_rate"] for line in lines]) if along_rate else np.arange(len(lines))[::-1]
    for ax, (name, label, scale) in zip(axes, ABLATION_METRICS, strict=True):
        spans = [mean_interval(np.asarray(line["values"][name]) * scale, confidence) for line in lines]
        means, halves = np.array([m for m, _ in spans]), np.array([h for _, h in spans])
        seeds = [np.asarray(line["values"][name], dtype=float) * scale for line in lines]
        mean_label = f"mean over seeds, {confidence:.0%} t-interval"
        if along_rate:
            _ = ax.errorbar(positions, means, yerr=halves, fmt="o-", color=OKABE_ITO["blue"], capsize=4,
                            label=mean_label)
            for x, values in zip(positions, seeds, strict=True):
                _ = ax.plot(np.full(len(values), x + 1.2), values, "x", color="#777777", ms=5)
            ax.set_xticks(positions, [f"{x:.0f} %" for x in positions])
            ax.set_xlabel("masking rate (tokens predicted)")
            ax.set_ylabel(label)
        else:
            _ = ax.errorbar(means, positions, xerr=halves, fmt="o", color=OKABE_ITO["blue"], capsize=4,
                            label=mean_label)
            for y, values in zip(positions, seeds, strict=True):
                _ = ax.plot(values, np.full(len(values), y - 0.22), "x", color="#777777", ms=5)
            _ = ax.axhline(positions[0], color=OKABE_ITO["orange"], lw=0.8, ls=":")  # first variant: BERT's recipe
            ax.set_yticks(positions, [line["label"] for line in lines] if ax is axes[0] else [""] * len(lines))
            ax.set_xlabel(label)
            ax.margins(x=0.2)
        _ = ax.plot([], [], "x", color="#777777", label="one seed")
        level = unigram_loss if name == "heldout_loss" else (None if chance_accuracy is None else 100 * chance_accuracy)
        if level is not None:
            kind = "unigram" if name == "heldout_loss" else "chance"
            draw = ax.axhline if along_rate else ax.axvline
            named = f"unigram frequencies ({level:.2f} nats)" if kind == "unigram" else f"chance ({level:.0f} %)"
            _ = draw(level, **_REFERENCE_STYLE[kind], label=named)
    named = {}  # one figure legend below the panels: the entries of every panel, each once
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            named.setdefault(text, handle)
    fig.legend(list(named.values()), list(named), loc="outside lower center", ncol=len(named), fontsize=9,
               frameon=False)
    fig.suptitle(title or f"Masking ablation: {family}")
    return fig


ACTION_GROUPS = (("[MASK]", "shown [MASK]"), ("random token", "shown a random token"),
                 ("unchanged", "shown the true token"), ("all", "all masked positions"))


@localised
def ablation_loss_by_action(results: dict, *, unigram_loss: float | None = None, title: str = "") -> Figure:
    """Held-out loss split by what the frozen evaluation showed at the position, one colour per variant.
    ``results``: ``{variant label: {action: {"loss", "loss_ci95", "tokens"}}}`` — one run's split
    (:func:`mlm_course.lab.ablation_grid.heldout_by_action`; error bars: 95 % interval over its scored positions) or
    the means over seeds (:func:`mlm_course.ablations.by_action_means`; error bars: 95 % t-interval over seeds)."""
    import numpy as np

    if not results:
        raise ValueError("pass at least one variant's held-out split.")
    fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
    width = 0.8 / len(results)
    for k, (name, split) in enumerate(results.items()):
        xs = np.arange(len(ACTION_GROUPS)) + (k - (len(results) - 1) / 2) * width
        values = [split[group]["loss"] for group, _ in ACTION_GROUPS]
        errors = [split[group].get("loss_ci95", 0.0) for group, _ in ACTION_GROUPS]
        _ = ax.errorbar(xs, values, yerr=errors, fmt="os^vDP"[k % 6], ms=6, capsize=3, ls="none",
                        color=SERIES_COLORS[k % len(SERIES_COLORS)], label=name)
    if unigram_loss is not None:
        _ = ax.axhline(unigram_loss, **_REFERENCE_STYLE["unigram"], label=f"unigram frequencies ({unigram_loss:.2f})")
    tokens = next(iter(results.values()))
    ax.set_xticks(range(len(ACTION_GROUPS)),
                  [f"{text}\n({tokens[group]['tokens']:,} positions)" for group, text in ACTION_GROUPS])
    ax.set_xlabel("masked positions of the frozen 15 % 80/10/10 evaluation, by what the input showed there")
    ax.set_ylabel("held-out cross-entropy (nats)")
    ax.legend(fontsize=9, ncol=2, loc="best")
    ax.set_title(title or "Held-out loss by what the evaluation showed", fontsize=11)
    return fig
