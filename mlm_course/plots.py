"""The figures the notebooks show. Each function returns a matplotlib Figure (testable without a display)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9", "bluish green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish purple": "#CC79A7",
}
"""The course palette (Okabe & Ito, 2008): distinguishable with the common colour-vision deficiencies."""

DTYPE_COLORS = {"float16": OKABE_ITO["orange"], "bfloat16": OKABE_ITO["reddish purple"],
                "float32": OKABE_ITO["blue"], "float64": OKABE_ITO["bluish green"]}
"""One colour per floating-point format, the same in every figure."""

SERIES_COLORS = (OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["bluish green"], OKABE_ITO["reddish purple"],
                 OKABE_ITO["vermillion"], OKABE_ITO["sky blue"])
"""Colours for the 1st, 2nd, … series of a figure whose series have no colour of their own."""

def figure_rule_violations(fig: Figure, *, max_width_in: float = 10.0, min_font_pt: float = 9.0) -> list[str]:
    """What in ``fig`` breaks the course's figure rules: wider than the notebook column, visible text smaller than
    ``min_font_pt``, a line or patch colour outside :data:`OKABE_ITO` (greys, black and white allowed).
    An empty list means the figure obeys them."""
    from matplotlib.colors import to_hex, to_rgba
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    problems = []
    width = float(fig.get_size_inches()[0])
    if width > max_width_in + 1e-9:
        problems.append(f"the figure is {width:.2f} in wide (at most {max_width_in:g} in)")
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.get_fontsize() < min_font_pt:
            problems.append(f"text {text.get_text()!r} is {text.get_fontsize():g} pt (at least {min_font_pt:g} pt)")
    allowed = {c.lower() for c in OKABE_ITO.values()}
    for artist in fig.findobj(lambda a: isinstance(a, Line2D | Patch) and a.get_visible()):
        colour = artist.get_color() if isinstance(artist, Line2D) else artist.get_facecolor()
        if to_rgba(colour)[3] == 0:
            continue
        code = to_hex(colour)
        if code not in allowed and not code[1:3] == code[3:5] == code[5:7]:
            problems.append(f"{type(artist).__name__} colour {code} is not in the Okabe–Ito palette")
    return problems


# ---- 01_why_log ----------------------------------------------------------------------------------------------


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
    ax.set_xlim(0, cap * 1.3)
    if pll:  # each p is p(x_i | the rest of the sentence): the sum is a pseudo-log-likelihood, not ln p(sentence)
        ax.set_xlabel("−ln p(xᵢ | rest of the sentence)  (nats)")
        ax.set_title(f"PLL = Σᵢ ln p(xᵢ | rest) = {-sum(surprisal):.2f} nats (a score, not ln p(sentence))")
    else:
        ax.set_xlabel("−ln p(token)  (nats)")
        ax.set_title(f"ln p(sentence) = Σ ln p(token) = {-sum(surprisal):.2f} nats")
    fig.tight_layout()
    return fig


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


# ---- 02_tokens -----------------------------------------------------------------------------------------------


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
    fig, axes = plt.subplots(1, len(sources), figsize=(min(10.0, 1.0 + 4.0 * len(sources)), 3.8), sharey=True,
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


def text_colour_on(fill: str) -> str:
    """"black" or "white", whichever contrasts more with the hex colour ``fill`` (WCAG relative luminance)."""
    channels = [int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "black" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "white"


# ---- 03_masking ----------------------------------------------------------------------------------------------

MASK_GRID_COLORS = {
    -1: ("#bbbbbb", "special / padding"),
    0: ("#ffffff", "not selected"),
    1: (OKABE_ITO["blue"], "selected → [MASK]"),
    2: (OKABE_ITO["vermillion"], "selected → random token"),
    3: (OKABE_ITO["bluish green"], "selected → unchanged"),
    4: (OKABE_ITO["reddish purple"], "selected (before replacement)"),
}
_GRID_CELL_IN, _GRID_MAX_WIDTH_IN = 0.7, 9.6  # cell and figure width (in); 9.6 + 2 × 0.1 in padding ≤ 10 in


def _grid_texts(shown, original) -> tuple[list[list[str]], float]:
    """Each cell's label ("shown" or "shown\n(original)") and a cell width (in) that fits the longest at 9 pt."""
    texts = [[tok if original is None or original[r][c] == tok else f"{tok}\n({original[r][c]})"
              for c, tok in enumerate(row)] for r, row in enumerate(shown)]
    longest = max(len(line) for row in texts for text in row for line in text.split("\n"))
    return texts, max(_GRID_CELL_IN, 0.068 * longest + 0.1)  # about 0.068 in a character at 9 pt, plus a margin


def mask_grid(shown, codes, *, original=None, row_labels=None, title: str = "", max_columns: int | None = None) -> Figure:
    """Rows of tokens (steps or samples) as coloured cells: grey special, white untouched, blue [MASK],
    vermillion random, green unchanged, purple selected-but-not-yet-replaced (codes -1, 0, 1, 2, 3, 4: see
    :func:`mlm_course.masking.display_codes`).

    ``shown`` are the tokens the model sees; where ``original`` differs, the original is written under it.
    Long sequences wrap into stacked panels of at most ``max_columns`` positions (default: as many as fit in a
    9.6-inch figure at 9-pt text); cells widen to fit the longest label; text is black or white, whichever
    contrasts more with its cell; the legend lists only the codes that appear.
    """
    import math

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
    labels = list(row_labels) if row_labels is not None else [str(r) for r in range(rows)]
    label_in = 0.3 + 0.065 * max(len(s) for s in labels)  # row labels at 9 pt: about 0.065 in a character
    texts, cell_in = _grid_texts(shown, original)
    fit = max(1, int((_GRID_MAX_WIDTH_IN - label_in - 0.1) // cell_in))
    if max_columns is not None and max_columns < 1:
        raise ValueError(f"max_columns={max_columns}: use a positive number of positions per panel.")
    per_panel = min(fit, max_columns or fit)
    panels = math.ceil(width / per_panel)
    per_panel = math.ceil(width / panels)  # balanced panels
    cmap = ListedColormap([MASK_GRID_COLORS[k][0] for k in sorted(MASK_GRID_COLORS)])
    fig_w = min(_GRID_MAX_WIDTH_IN, label_in + 0.1 + per_panel * cell_in)
    fig, axes = plt.subplots(panels, 1, figsize=(fig_w, panels * (0.55 * rows + 0.6) + 1.2), squeeze=False,
                             layout="constrained")
    for ax, start in zip(axes[:, 0], range(0, width, per_panel), strict=True):
        stop = min(start + per_panel, width)
        _ = ax.imshow(grid[:, start:stop], cmap=cmap, vmin=-1.5, vmax=4.5, aspect="auto")
        for r in range(rows):
            for c in range(start, min(stop, len(shown[r]))):
                _ = ax.text(c - start, r, texts[r][c], ha="center", va="center", fontsize=9,
                            color=text_colour_on(MASK_GRID_COLORS[grid[r, c]][0]))
        ax.set_xticks(np.arange(stop - start) - 0.5, minor=True)
        ax.set_yticks(np.arange(rows) - 0.5, minor=True)
        ax.grid(which="minor", color="black", linewidth=0.6)
        ax.tick_params(which="minor", length=0)
        ax.set_xticks(range(stop - start), [str(i) for i in range(start, stop)], fontsize=9)
        ax.set_yticks(range(rows), labels, fontsize=9)
    axes[-1, 0].set_xlabel("position")
    present = set(np.unique(grid))
    handles = [Patch(facecolor=col, edgecolor="black", label=name)
               for code, (col, name) in MASK_GRID_COLORS.items() if code in present]
    columns = max(1, min(3, len(handles), int(fig_w // 2.8)))  # a legend entry takes about 2.8 in at 9 pt
    fig.legend(handles=handles, loc="outside lower center", ncol=columns, fontsize=9, frameon=False)
    if title:
        axes[0, 0].set_title(title)
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
        _ = ax.bar(xs + (i - (len(arrays) - 1) / 2) * width, share, width, label=name,
                   color=SERIES_COLORS[i % len(SERIES_COLORS)])
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


# ---- 04_inside_bert -----------------------------------------------------------------------------------------


def attention_heads(attentions, tokens, *, layers=None, heads=None, title: str = "") -> Figure:
    """Attention weights of one sentence as heatmaps, one row per layer and one column per head.

    ``attentions``: one (heads, length, length) array per layer, rows = queries, columns = keys (what
    :meth:`mlm_course.bert.BertMLM.encode` returns, for one sentence). ``layers`` / ``heads`` pick which to show.
    """
    import numpy as np

    weights = [np.asarray(a, dtype=float) for a in attentions]
    if not weights or any(w.ndim != 3 or w.shape[1:] != (len(tokens), len(tokens)) for w in weights):
        raise ValueError("pass one (heads, length, length) array per layer, length = len(tokens).")
    layers = list(range(len(weights))) if layers is None else list(layers)
    heads = list(range(weights[0].shape[0])) if heads is None else list(heads)
    side = min(4.4, 9.2 / len(heads))
    fig, axes = plt.subplots(len(layers), len(heads), figsize=(side * len(heads) + 0.8, side * len(layers) + 0.4),
                             squeeze=False, layout="constrained")
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r][c]
            image = ax.imshow(weights[layer][head], cmap="Blues", vmin=0, vmax=1)
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=10)
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=9)
            ax.set_yticks(range(len(tokens)), tokens if c == 0 else [""] * len(tokens), fontsize=9)
            if r == len(layers) - 1:
                ax.set_xlabel("key (attended to)")
            if c == 0:
                ax.set_ylabel("query (attending)")
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight (each row sums to 1)")
    if title:
        fig.suptitle(title)
    return fig


BERT_PART_COLORS = {"embeddings": OKABE_ITO["blue"], "encoder": OKABE_ITO["orange"],
                    "mlm_head": OKABE_ITO["bluish green"]}
BERT_PART_LABELS = {"embeddings": "embeddings (word table = tied decoder)", "encoder": "encoder layers",
                    "mlm_head": "MLM head (dense, LayerNorm, bias)"}


def parameters_by_part(counts: dict, *, title: str = "") -> Figure:
    """One horizontal bar per model: the share of its masked-LM parameters in embeddings, encoder and MLM head.

    ``counts``: {model name: :func:`mlm_course.bert.parameter_count` dict}; the total is written beside each name.
    """
    if not counts:
        raise ValueError("pass at least one model's parameter counts.")
    fig, ax = plt.subplots(figsize=(8.5, 0.7 * len(counts) + 1.9), layout="constrained")
    names = list(counts)[::-1]
    left = [0.0] * len(names)
    for part, colour in BERT_PART_COLORS.items():
        shares = [100 * counts[n][part] / counts[n]["total"] for n in names]
        _ = ax.barh(range(len(names)), shares, left=left, color=colour, label=BERT_PART_LABELS[part])
        for y, (x0, share) in enumerate(zip(left, shares, strict=True)):
            if share >= 6:
                _ = ax.text(x0 + share / 2, y, f"{share:.0f} %", ha="center", va="center", fontsize=10,
                            color=text_colour_on(colour))
        left = [x0 + share for x0, share in zip(left, shares, strict=True)]
    ax.set_yticks(range(len(names)), [f"{n}\n{counts[n]['total'] / 1e6:.2f} M" for n in names])
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the masked-LM model's parameters (%)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize=9, frameon=False)
    ax.set_title(title or "Where the parameters are")
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


ACTION_METRIC_LABELS = {"loss": "cross-entropy (nats)", "top1": "top-1 accuracy", "mask": "share predicting [MASK]",
                        "copy": "share copying the shown token"}


def loss_by_action_bars(results: dict, *, metric: str = "loss", title: str = "") -> Figure:
    """Grouped bars: ``metric`` at the [MASK], random and unchanged positions (and all), one colour per model.

    ``results``: ``{model name: mlm_course.objective.evaluate_by_action(...)}``. For the loss, a ``loss_ci95``
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


def training_loss_curves(histories: dict, *, heldout: dict | None = None, title: str = "") -> Figure:
    """Each run's training loss (on its own labels) by step, one colour per run; ``heldout`` (``{run: loss}``)
    adds each run's held-out loss on correct labels as a marker at its last step.

    ``histories``: ``{run name: TrainResult.metrics}`` (rows with ``split == "train"`` are plotted).
    """
    if not histories:
        raise ValueError("pass at least one run's metrics: {name: train_with_batches(...).metrics}.")
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for k, (name, rows) in enumerate(histories.items()):
        train = [m for m in rows if m["split"] == "train"]
        if not train:
            raise ValueError(f"run {name!r} has no training rows: pass the metrics of a training run.")
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        _ = ax.plot([m["step"] for m in train], [m["loss"] for m in train], color=color, label=name)
        if heldout is not None and name in heldout:
            _ = ax.plot([train[-1]["step"]], [heldout[name]], "X", ms=10, color=color, label="_held-out")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("masked-LM loss (nats)")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title="line: training loss\n(its own labels)\n× : held-out loss\n(correct labels)", title_fontsize=9)
    ax.set_title(title or "training loss by step")
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


# ---- 06_pretraining ------------------------------------------------------------------------------------------


def _mark_stages(metrics: list[dict], axes) -> None:
    for before, after in zip(metrics, metrics[1:], strict=False):
        if after.get("stage", 1) != before.get("stage", 1):
            for ax in axes:
                ax.axvline(before["step"], color="black", ls=":", lw=1)
            axes[0].annotate(f"stage {after['stage']}", (before["step"], 0), xycoords=("data", "axes fraction"),
                             xytext=(3, 4), textcoords="offset points", fontsize=9)


def pretraining_curves(metrics: list[dict], *, baseline: dict | None = None, copying: dict | None = None,
                       title: str = "") -> Figure:
    """Training loss (per log interval) and held-out loss / top-1 / top-5 by step, with the unigram baseline
    (``baseline``) and the unigram-plus-copying one (``copying``, :func:`mlm_course.pretraining.copying_baseline`).

    Rows with a ``stage`` number (joined runs of continued pretraining) get a dotted line where each later stage starts.
    """
    train = [m for m in metrics if m["split"] == "train"]
    evals = [m for m in metrics if m["split"] == "eval"]
    blue, orange = OKABE_ITO["blue"], OKABE_ITO["orange"]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    _mark_stages(metrics, (ax_loss, ax_acc))
    ax_loss.plot([m["step"] for m in train], [m["loss"] for m in train], lw=0.8, alpha=0.7, color=OKABE_ITO["sky blue"],
                 label="training batches (mean per log interval)")
    ax_loss.plot([m["step"] for m in evals], [m["loss"] for m in evals], "o-", ms=4, color=blue,
                 label="held-out set (frozen masks)")
    for metric, style, color in (("top1", "o-", blue), ("top5", "s-", orange)):
        ax_acc.plot([m["step"] for m in evals], [m[metric] for m in evals], style, ms=4, color=color,
                    label=f"model {metric}")
    for name, row, style in (("unigram", baseline, "--"), ("unigram + copying", copying, ":")):
        if row is None:
            continue
        ax_loss.axhline(row["loss"], color="black", ls=style, lw=1.2, label=f"{name} ({row['loss']:.2f})")
        for metric, color in (("top1", blue), ("top5", orange)):
            ax_acc.axhline(row[metric], color=color, ls=style, lw=1, label=f"{name} {metric}")
    ax_loss.set(xlabel="optimiser step", ylabel="masked-token cross-entropy (nats)", title=title or "loss")
    ax_acc.set(xlabel="optimiser step", ylabel="held-out accuracy on masked tokens", title="accuracy", ylim=(0, None))
    ax_loss.legend(fontsize=9, loc="upper right")
    ax_acc.legend(fontsize=9, loc="best")
    fig.tight_layout()
    return fig


def fill_mask_bars(rows: list[tuple[str, list[tuple[str, float]], set[str]]], *, columns: int = 3) -> Figure:
    """One small bar chart per sentence: the top-k guesses and their probabilities; accepted answers in green."""
    import textwrap

    n_rows = -(-len(rows) // columns)
    fig, axes = plt.subplots(n_rows, columns, figsize=(3.3 * columns, 2.3 * n_rows), squeeze=False)
    for ax, (text, guesses, answers) in zip(axes.flat, rows, strict=False):
        tokens = [t for t, _ in guesses][::-1]
        probs = [p for _, p in guesses][::-1]
        ax.barh(tokens, probs, color=[OKABE_ITO["bluish green"] if t in answers else "#999999" for t in tokens])
        ax.set_title(textwrap.fill(text, 30), fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_xlabel("probability", fontsize=9)
        ax.tick_params(labelsize=9)
    for ax in axes.flat[len(rows):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def accuracy_by_frequency(buckets: list[dict], *, title: str = "") -> Figure:
    """Top-1 accuracy of the model and of unigram frequencies, per training-frequency bucket of the true token,
    with 95 % Wilson intervals over the bucket's tokens."""
    from mlm_course.masking import binomial_interval

    x = range(len(buckets))
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for offset, key, name, color in ((-0.2, "model_top1", "model", OKABE_ITO["blue"]),
                                     (0.2, "unigram_top1", "unigram frequencies", OKABE_ITO["orange"])):
        values = [b[key] for b in buckets]
        spans = [binomial_interval(round(b[key] * b["tokens"]), b["tokens"], 0.95) if b["tokens"] else (0.0, 0.0)
                 for b in buckets]
        errors = [[max(0.0, v - low) for v, (low, _) in zip(values, spans, strict=True)],
                  [max(0.0, high - v) for v, (_, high) in zip(values, spans, strict=True)]]
        ax.bar([i + offset for i in x], values, width=0.4, label=name, color=color, yerr=errors, capsize=3)
    ax.set_xticks(list(x), [f"{b['bucket']}\n({b['tokens']:,} tokens)" for b in buckets], fontsize=9)
    ax.set(xlabel="true token's share of all training tokens", ylabel="top-1 accuracy (95 % interval)",
           title=title or "which masked tokens the model gets right", ylim=(0, 1))
    ax.legend(fontsize=9)
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
        _ = ax.text(45, result["accuracy"], f"zero-shot PLL, {label.split(' (')[0]}: "
                    f"{result['accuracy']:.1%}", fontsize=9, va="center", color=colour)
    _ = ax.axhline(chance, color="#555555", ls="--", lw=1, label=f"chance ({chance:.0%})")
    ax.set_xscale("log")
    ax.set_xlim(40, all_labels * 1.6)
    ax.set_ylim(min(chance - 0.03, ax.get_ylim()[0]), 1.0)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:.0%}"))
    ax.set_xlabel(f"training labels (log scale; the last point is every label, {all_labels:,})")
    ax.set_ylabel("test accuracy (mean of seeds, 95 % t-interval)")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(0, -0.16), ncol=2, frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig


# ---- 08_ablations --------------------------------------------------------------------------------------------


ABLATION_METRICS = (
    ("heldout_loss", "held-out masked-LM loss (nats)\n(frozen 15 % 80/10/10 masks; lower is better)", 1.0),
    ("finetune_acc", "fine-tuned sentiment\ntest accuracy (%)", 100.0),
    ("probe_acc", "frozen-feature probe\ntest accuracy (%)", 100.0),
)
_REFERENCE_STYLE = {"unigram": {"color": OKABE_ITO["reddish purple"], "ls": "-.", "lw": 1.2},
                    "chance": {"color": OKABE_ITO["vermillion"], "ls": "--", "lw": 1.2}}


def ablation_panels(summary: list[dict], family: str, *, unigram_loss: float | None = None,
                    chance_accuracy: float | None = 0.5, confidence: float = 0.95, title: str = "") -> Figure:
    """One panel per metric for the variants of ``family`` (summary lines of :func:`mlm_course.ablations.summarise`):
    the mean over seeds with its ``confidence`` t-interval, each seed as a grey cross, and the reference levels
    (``unigram_loss`` on the loss panel, ``chance_accuracy`` on the accuracy panels) drawn and named.
    The ``rate`` family is drawn as metric against masking rate (lines); the others as one row per variant."""
    import numpy as np

    from mlm_course.ablations import mean_interval

    lines = [line for line in summary if line["family"] == family and line["seeds"] > 0]
    if not lines:
        raise ValueError(f"no finished runs of the {family!r} family in this summary: run the grid first.")
    along_rate = family == "rate"
    size = (10, 4.0) if along_rate else (10, 0.45 * len(lines) + 2.4)
    fig, axes = plt.subplots(1, len(ABLATION_METRICS), figsize=size, layout="constrained")
    positions = np.array([100 * line["rate"] for line in lines]) if along_rate else np.arange(len(lines))[::-1]
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


def ablation_loss_by_action(results: dict, *, unigram_loss: float | None = None, title: str = "") -> Figure:
    """Held-out loss split by what the frozen evaluation showed at the position, one colour per variant.
    ``results``: ``{variant label: evaluate_by_action(...)}`` (:func:`mlm_course.ablations.heldout_by_action`);
    error bars: the 95 % interval over the scored tokens (``loss_ci95``)."""
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
