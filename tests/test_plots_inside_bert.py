"""plots for 04_inside_bert: what each panel shows, labels and the figure rules."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from mlm_course import plots


def test_attention_heads_one_panel_per_layer_and_head():
    rng = np.random.default_rng(0)
    weights = [rng.dirichlet(np.ones(4), size=(3, 4)) for _ in range(2)]  # 2 layers × 3 heads × 4 × 4
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    fig = plots.attention_heads(weights, tokens, heads=[0, 2], title="t")
    assert isinstance(fig, Figure) and plots.figure_rule_violations(fig) == []
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4  # 2 layers × the 2 chosen heads
    assert np.allclose(panels[1].images[0].get_array(), weights[0][2])  # row 1, column 2 = layer 1, head 3
    assert panels[3].get_title() == "layer 2, head 3"
    assert [t.get_text() for t in panels[0].get_xticklabels()] == tokens
    assert panels[2].get_xlabel() == "key (attended to)" and panels[0].get_ylabel() == "query (attending)"
    assert panels[0].images[0].get_clim() == (0, 1)
    with pytest.raises(ValueError, match="length"):
        plots.attention_heads(weights, tokens[:3])


def test_parameters_by_part_bars_are_shares_of_the_total():
    counts = {"tiny": {"embeddings": 60, "encoder": 30, "mlm_head": 10, "pooler": 5, "total": 100},
              "base": {"embeddings": 20, "encoder": 75, "mlm_head": 5, "pooler": 5, "total": 100}}
    fig = plots.parameters_by_part(counts)
    assert plots.figure_rule_violations(fig) == []
    ax = fig.axes[0]
    widths = [p.get_width() for p in ax.patches]
    assert widths == pytest.approx([20, 60, 75, 30, 5, 10])  # embeddings, encoder, head; base drawn first (bottom)
    assert [p.get_x() for p in ax.patches][2:4] == pytest.approx([20, 60])  # encoder starts where embeddings end
    assert ax.get_xlim() == (0, 100) and "%" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["base\n0.00 M", "tiny\n0.00 M"]
    assert len(ax.get_legend().get_texts()) == 3
    with pytest.raises(ValueError, match="at least one"):
        plots.parameters_by_part({})


def test_parameters_by_part_labels_contrast_with_their_bars():
    """Each percentage is black or white by its bar's luminance: white on orange (2.2 : 1) was hard to read."""
    from matplotlib.colors import to_hex, to_rgb

    def luminance(colour):
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    counts = {"tiny": {"embeddings": 40, "encoder": 35, "mlm_head": 25, "pooler": 5, "total": 100}}
    fig = plots.parameters_by_part(counts)
    ax = fig.axes[0]
    assert len(ax.texts) == 3
    for text, bar in zip(ax.texts, ax.patches, strict=True):
        high, low = sorted((luminance(text.get_color()), luminance(bar.get_facecolor())), reverse=True)
        assert (high + 0.05) / (low + 0.05) >= 4.5, (text.get_text(), to_hex(bar.get_facecolor()))
    assert ax.texts[1].get_color() == "black"  # on the encoder's orange
    assert plots.figure_rule_violations(fig) == []
