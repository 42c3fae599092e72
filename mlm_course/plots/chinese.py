"""Figures of 10_chinese_masking: accuracies at masked characters, with 95 % Wilson intervals."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from mlm_course.plots.language import localised
from mlm_course.plots.style import SERIES_COLORS
from mlm_course.statistics import wilson_interval


@localised
def hit_rate_bars(groups: dict[str, dict[str, tuple[int, int]]], *, title: str, ylabel: str,
                  reference: dict[str, float] | None = None, confidence: float = 0.95) -> Figure:
    """Grouped bars of accuracies, from zero: ``groups`` maps a group (e.g. "character masking") to
    ``{bar name: (hits, trials)}`` (e.g. "top-1"); each bar shows hits / trials with its Wilson ``confidence``
    interval and its value. ``reference``: named horizontal lines (e.g. a unigram guess), drawn and labelled."""
    names = list(dict.fromkeys(bar for bars in groups.values() for bar in bars))
    if not groups or not names:
        raise ValueError("groups is empty: pass {group: {bar: (hits, trials)}}, e.g. {'bigram': {'top-1': (40, 100)}}.")
    fig, ax = plt.subplots(figsize=(7.5, 4.4), layout="constrained")
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        xs = [i for i, bars in enumerate(groups.values()) if name in bars]
        counts = [bars[name] for bars in groups.values() if name in bars]
        rates = np.array([hits / trials for hits, trials in counts])
        bounds = np.array([wilson_interval(hits, trials, confidence) for hits, trials in counts])
        errors = np.vstack([rates - bounds[:, 0], bounds[:, 1] - rates])
        positions = np.array(xs) + (k - (len(names) - 1) / 2) * width
        ax.bar(positions, 100 * rates, width * 0.9, yerr=100 * errors, capsize=4, color=SERIES_COLORS[k], label=name)
        for x, rate, high in zip(positions, rates, bounds[:, 1], strict=True):
            ax.text(x, 100 * high + 1, f"{rate:.1%}", ha="center", va="bottom", fontsize=9)
    for j, (label, value) in enumerate((reference or {}).items()):
        ax.axhline(100 * value, color="black", ls=("--", ":", "-.")[j % 3], lw=1, label=f"{label} ({value:.1%})")
    ax.set_xticks(range(len(groups)), list(groups))
    tops = [wilson_interval(h, t, confidence)[1] for bars in groups.values() for h, t in bars.values()]
    top = 100 * max(tops + list((reference or {}).values()))
    ax.set_ylim(0, max(top * 1.2, 5))
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title} ({confidence:.0%} intervals)")
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    return fig
