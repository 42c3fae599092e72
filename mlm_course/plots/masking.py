"""Figures of 03_masking: the mask grid, positions per sequence, measured rates, static vs dynamic masks."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised, mark_as_data
from mlm_course.plots.style import OKABE_ITO, SERIES_COLORS, text_colour_on, text_width_in

MASK_GRID_COLORS = {
    -1: ("#bbbbbb", "special / padding"),
    0: ("#ffffff", "not selected"),
    1: (OKABE_ITO["blue"], "selected → [MASK]"),
    2: (OKABE_ITO["vermillion"], "selected → random token"),
    3: (OKABE_ITO["bluish green"], "selected → unchanged"),
    4: (OKABE_ITO["reddish purple"], "selected (before replacement)"),
}
_GRID_MIN_CELL_IN, _GRID_MAX_WIDTH_IN, _GRID_ROW_IN = 0.48, 9.6, 0.46  # 9.6 + 2 × 0.1 in padding ≤ 10 in


def _grid_texts(shown, original) -> tuple[list[list[str]], list[float]]:
    """Each cell's label ("shown" or "shown\n(original)") and each column's width (in): its longest label at 9 pt
    plus a margin."""
    texts = [[tok if original is None or original[r][c] == tok else f"{tok}\n({original[r][c]})"
              for c, tok in enumerate(row)] for r, row in enumerate(shown)]
    width = max(len(row) for row in texts)
    return texts, [max([_GRID_MIN_CELL_IN] + [text_width_in(row[c]) + 0.2 for row in texts if c < len(row)])
                   for c in range(width)]


def _write_cells(ax, texts, grid, xs, start: int, stop: int) -> None:
    """The labels of columns ``start``…``stop`` - 1 in their cells (left edges ``xs``), black or white, whichever
    contrasts more with the cell; they are tokens, so :func:`mark_as_data` keeps them out of translation."""
    for r, row in enumerate(texts):
        for c in range(start, min(stop, len(row))):
            mark_as_data(ax.text((xs[c - start] + xs[c - start + 1]) / 2, r, row[c], ha="center", va="center",
                                 fontsize=9, color=text_colour_on(MASK_GRID_COLORS[grid[r, c]][0])))


def _grid_panels(widths, breakable, room: float, max_columns: int) -> list[tuple[int, int]]:
    """(start, stop) of each panel: as few as fit in ``room`` inches and ``max_columns`` positions, breaking only
    where ``breakable`` (a word starts; inside a word only if it alone is too wide), panel widths as even as can be."""
    n = len(widths)
    edges = [0.0]
    for w in widths:
        edges.append(edges[-1] + w)

    def fits(a, b):
        return b - a == 1 or (b - a <= max_columns and edges[b] - edges[a] <= room)

    words = [c for c in range(n) if c == 0 or breakable[c]] + [n]
    cuts = sorted({c for a, b in zip(words, words[1:], strict=False) for c in ([a] if fits(a, b) else range(a, b))}
                  | {n})
    best = {0: (0, 0.0, None)}  # cut → (panels, sum of squared widths, previous cut)
    for j in cuts[1:]:
        best[j] = min((best[i][0] + 1, best[i][1] + (edges[j] - edges[i]) ** 2, i)
                      for i in cuts if i < j and i in best and fits(i, j))
    panels, stop = [], n
    while stop:
        panels.append((best[stop][2], stop))
        stop = best[stop][2]
    return panels[::-1]


@localised
def mask_grid(shown, codes, *, original=None, row_labels=None, title: str = "", max_columns: int | None = None) -> Figure:
    """Rows of tokens (steps or samples) as coloured cells: grey special, white untouched, blue [MASK],
    vermillion random, green unchanged, purple selected-but-not-yet-replaced (codes -1, 0, 1, 2, 3, 4: see
    :func:`mlm_course.masking.display_codes`).

    ``shown`` are the tokens the model sees; where ``original`` differs, the original is written under it.
    Each column is as wide as its longest label at 9 pt. Long sequences wrap into stacked panels of at most
    ``max_columns`` positions (default: as many as fit in a 9.6-inch figure), only where a word starts (a piece
    "##…" of ``original``, or of ``shown`` without it, continues its word); text is black or white, whichever
    contrasts more with its cell; the legend lists only the codes that appear.
    """
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    rows = len(shown)
    if rows == 0 or len(codes) != rows or any(len(s) != len(c) for s, c in zip(shown, codes, strict=True)):
        raise ValueError("pass one code per shown token, row by row (and at least one row).")
    if max_columns is not None and max_columns < 1:
        raise ValueError(f"max_columns={max_columns}: use a positive number of positions per panel.")
    width = max(len(s) for s in shown)
    grid = np.full((rows, width), -1, dtype=int)
    for r, row in enumerate(codes):
        grid[r, : len(row)] = [int(c) for c in row]
    present = set(np.unique(grid))
    if not present <= set(MASK_GRID_COLORS):
        raise ValueError(f"codes must be among {sorted(MASK_GRID_COLORS)}.")
    labels = list(row_labels) if row_labels is not None else [str(r) for r in range(rows)]
    label_in = 0.25 + max(text_width_in(s) for s in labels)
    texts, widths = _grid_texts(shown, original)
    words = original if original is not None else shown
    breakable = [not any(c < len(row) and row[c].startswith("##") for row in words) for c in range(width)]
    panels = _grid_panels(widths, breakable, _GRID_MAX_WIDTH_IN - label_in - 0.1, max_columns or width)
    span = max(sum(widths[a:b]) for a, b in panels)
    cmap = ListedColormap([MASK_GRID_COLORS[k][0] for k in sorted(MASK_GRID_COLORS)])
    legend_columns = max(1, min(3, len(present), int(span // 2.6)))  # a legend entry needs about 2.6 in
    legend_rows = -(-len(present) // legend_columns)
    fig_w = label_in + 0.1 + span
    fig, axes = plt.subplots(len(panels), 1, figsize=(fig_w, len(panels) * (rows * _GRID_ROW_IN + 0.42) + 0.2
                             + 0.22 * legend_rows + (0.3 if title else 0)), squeeze=False, layout="constrained")
    for ax, (start, stop) in zip(axes[:, 0], panels, strict=True):
        xs = np.concatenate([[0.0], np.cumsum(widths[start:stop])])
        _ = ax.pcolormesh(xs, np.arange(rows + 1) - 0.5, grid[:, start:stop], cmap=cmap, vmin=-1.5, vmax=4.5,
                          edgecolors="black", linewidth=0.6)
        _write_cells(ax, texts, grid, xs, start, stop)
        ax.set(xlim=(0, span), ylim=(rows - 0.5, -0.5))
        ax.set_xticks((xs[:-1] + xs[1:]) / 2, [str(i) for i in range(start, stop)], fontsize=9)
        ax.set_yticks(range(rows), labels, fontsize=9)
        ax.tick_params(length=0)
        ax.spines[:].set_visible(False)
    axes[-1, 0].set_xlabel("position")
    handles = [Patch(facecolor=col, edgecolor="black", label=name)
               for code, (col, name) in MASK_GRID_COLORS.items() if code in present]
    fig.legend(handles=handles, loc="outside lower center", ncol=legend_columns, fontsize=9, frameon=False)
    if title:
        axes[0, 0].set_title(title)
    return fig


@localised
def masks_per_sequence_hist(counts: dict, *, title: str = "") -> Figure:
    """Side-by-side bars: how many positions each scheme selects per sequence (``{scheme: counts per row}``).

    The default title states how many sequences were counted (from the data); where the schemes counted different
    numbers, each legend entry states its own.
    """
    import numpy as np

    if not counts or any(len(v) == 0 for v in counts.values()):
        raise ValueError("pass {scheme name: number of selected positions per sequence}, none empty.")
    arrays = {name: np.asarray(v, dtype=int) for name, v in counts.items()}
    sizes = {len(a) for a in arrays.values()}
    top = max(int(a.max()) for a in arrays.values())
    xs = np.arange(top + 1)
    width = 0.8 / len(arrays)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (name, a) in enumerate(arrays.items()):
        share = np.bincount(a, minlength=top + 1) / len(a)
        _ = ax.bar(xs + (i - (len(arrays) - 1) / 2) * width, share, width,
                   label=name if len(sizes) == 1 else f"{name} ({len(a):,} sequences)",
                   color=SERIES_COLORS[i % len(SERIES_COLORS)])
    ax.set_xticks(xs)
    ax.set_xlabel("selected positions in the sequence")
    ax.set_ylabel("fraction of sequences")
    ax.legend()
    counted = f" ({next(iter(sizes)):,} sequences)" if len(sizes) == 1 else ""
    ax.set_title(title or f"Positions selected per sequence{counted}")
    fig.tight_layout()
    return fig


@localised
def rates_vs_targets(rates: dict, targets: dict, *, confidence: float = 0.999) -> Figure:
    """Measured minus target, in percentage points, with the measurement's interval as an error bar.

    ``rates``: ``{name: {"rate", "low", "high", ...}}`` (as :func:`mlm_course.mask_checks.measure_rates` returns);
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
    _ = ax.errorbar(diff, ys, xerr=np.vstack([low, high]), fmt="o", capsize=5, color=OKABE_ITO["blue"])
    _ = ax.axvline(0, color="black", lw=1)
    labels = [f"{n}: {100 * rates[n]['rate']:.2f} % (target {100 * targets[n]:g} %)" for n in names]
    ax.set_yticks(ys, labels)
    span = max(float(np.max(np.abs(diff) + np.maximum(low, high))), 0.05) * 1.3
    ax.set_xlim(-span, span)
    ax.set_xlabel(f"measured − target (percentage points), {100 * confidence:g} % interval")
    ax.set_title("Measured rates against their targets")
    fig.tight_layout()
    return fig


@localised
def distinct_masks_plot(epochs, curves: dict) -> Figure:
    """Distinct masked versions of a sequence seen after each epoch, one line per strategy."""
    if not curves or any(len(v) != len(epochs) for v in curves.values()):
        raise ValueError("pass one value per epoch for every curve.")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for k, (name, values) in enumerate(curves.items()):
        _ = ax.plot(list(epochs), list(values), marker="o", ms=3, label=name, color=SERIES_COLORS[k % len(SERIES_COLORS)])
    ax.set_xlabel("epoch")
    ax.set_ylabel("distinct masks seen so far")
    ax.legend()
    ax.set_title("Static vs dynamic masking")
    fig.tight_layout()
    return fig
