"""Figures of 02_tokens: how often WordPiece cuts a word into 1, 2, … pieces."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised
from mlm_course.plots.style import SERIES_COLORS


@localised
def pieces_per_word_dots(counts: dict[tuple[str, str], dict[int, int]], *, max_pieces: int = 5) -> Figure:
    """Share of running words cut into 1, 2, … pieces: one panel per text source, one marker per tokenizer.

    ``counts`` maps ``(source, tokenizer name)`` to ``{pieces: words}`` (``TokenStats.pieces_per_word``); words
    with ``max_pieces`` or more pieces share the last point. Dots on a log axis (no bars, so no baseline).
    """
    if not counts:
        raise ValueError("counts is empty: pass {(source, tokenizer): {pieces: words}} for at least one pair.")
    if max_pieces < 2:
        raise ValueError(f"max_pieces={max_pieces}: use 2 or more.")
    if any(not isinstance(key, tuple) or len(key) != 2 for key in counts):
        raise ValueError("key counts by (source, tokenizer name), e.g. ('austen', 'bert 30k').")
    sources = list(dict.fromkeys(source for source, _ in counts))
    names = list(dict.fromkeys(name for _, name in counts))
    xs = list(range(1, max_pieces + 1))
    fig, axes = plt.subplots(1, len(sources), figsize=(min(9.8, 1.0 + 4.0 * len(sources)), 3.8), sharey=True,
                             squeeze=False, layout="constrained")
    markers = "osD^v"
    for ax, source in zip(axes[0], sources, strict=True):
        for k, name in enumerate(names):
            per_word = counts.get((source, name))
            if per_word is None:
                continue
            total = sum(per_word.values())
            if total == 0:
                raise ValueError(f"counts[{(source, name)!r}] holds no words.")
            shares = [per_word.get(n, 0) / total for n in xs[:-1]]
            shares.append(sum(c for n, c in per_word.items() if n >= max_pieces) / total)
            shown = [(x + (k - (len(names) - 1) / 2) * 0.12, s) for x, s in zip(xs, shares, strict=True) if s > 0]
            _ = ax.plot(*zip(*shown, strict=True), marker=markers[k % len(markers)], ls=":", lw=1, ms=7,
                        color=SERIES_COLORS[k % len(SERIES_COLORS)], label=name)
        ax.set_yscale("log")
        ax.set_xticks(xs, [str(n) for n in xs[:-1]] + [f"{max_pieces}+"])
        ax.set_xlabel("pieces per word")
        ax.set_title(f"{source} (held-out)")
        ax.grid(axis="y", which="major", alpha=0.3)
    axes[0][0].set_ylabel("share of running words (log scale)")
    axes[0][-1].legend(fontsize=9)
    fig.suptitle("How often WordPiece splits a word, by source and vocabulary")
    return fig
