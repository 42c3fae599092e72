"""Figures of 04_inside_bert: attention heatmaps and where the parameters are."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised, mark_as_data
from mlm_course.plots.style import OKABE_ITO, text_colour_on


@localised
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
            mark_as_data(ax.xaxis, ax.yaxis)
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


@localised
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
