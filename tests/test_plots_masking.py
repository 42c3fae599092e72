"""plots for 03_masking: axes, labels and the plotted data."""

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from mlm_course import masking, plots


def test_mask_grid_colours_cells_by_code_and_writes_tokens():
    shown = [["[CLS]", "the", "fox", "[SEP]"], ["[CLS]", "[MASK]", "cat", "[SEP]"]]
    original = [["[CLS]", "the", "fox", "[SEP]"], ["[CLS]", "the", "fox", "[SEP]"]]
    codes = [[-1, 0, 4, -1], [-1, 1, 2, -1]]
    fig = plots.mask_grid(shown, codes, original=original, row_labels=["2. select", "3. replace"], title="t")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert np.array_equal(ax.collections[0].get_array(), np.array(codes))
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["[CLS]", "the", "fox", "[SEP]", "[CLS]", "[MASK]\n(the)", "cat\n(fox)", "[SEP]"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["2. select", "3. replace"]
    assert ax.get_title() == "t" and ax.get_xlabel() == "position"
    # the legend names only the codes that appear (no 'unchanged' cell here), in the table's order
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == [plots.MASK_GRID_COLORS[c][1] for c in (-1, 0, 1, 2, 4)]
    # the colour of each code is the one the legend announces
    cmap, norm = ax.collections[0].get_cmap(), ax.collections[0].norm
    for code, (colour, _) in plots.MASK_GRID_COLORS.items():
        assert np.allclose(cmap(norm(code))[:3], tuple(int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)))
    assert plots.figure_rule_violations(fig) == []


def test_mask_grid_wraps_long_sequences_into_panels_within_the_column():
    n = 30
    shown = [[f"w{i}" for i in range(n)]] * 2
    codes = [[-1] + [0] * (n - 2) + [-1], [-1] + [1, 0] * ((n - 2) // 2) + [-1]]
    fig = plots.mask_grid(shown, codes, row_labels=["course checkpoint (MLM on Austen + Wikipedia)", "token-level"])
    assert plots.figure_rule_violations(fig) == []
    assert len(fig.axes) >= 3
    widths = [ax.collections[0].get_array().shape[1] for ax in fig.axes]
    assert sum(widths) == n and max(widths) - min(widths) <= 1  # balanced panels, every position once
    first_ticks = [int(ax.get_xticklabels()[0].get_text()) for ax in fig.axes]
    assert first_ticks == [sum(widths[:k]) for k in range(len(widths))]  # ticks keep the true positions
    assert fig.axes[1].texts[0].get_text() == f"w{widths[0]}"
    # a smaller max_columns gives more panels; a 12-token sentence fits in one
    for fig, panels in ((plots.mask_grid(shown, codes, max_columns=5), 6),
                        (plots.mask_grid([["t"] * 12], [[0] * 12], row_labels=["seed 10"]), 1)):
        assert len(fig.axes) == panels and plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="max_columns"):
        plots.mask_grid(shown, codes, max_columns=0)


def test_mask_grid_from_a_masked_batch():
    ids = torch.tensor([[101, 7, 8, 9, 102]])
    batch = masking.mask_tokens(ids, masking.MaskSpec(mask_rate=1.0), masking.TokenIds(103, (0, 101, 102, 103), 200),
                                generator=torch.Generator().manual_seed(0))
    codes = masking.display_codes(batch)[0]
    assert codes[0] == -1 and codes[-1] == -1 and (codes[1:4] > 0).all()
    assert masking.display_codes(batch, before_replacement=True).tolist() == [[-1, 4, 4, 4, -1]]
    fig = plots.mask_grid([[str(i) for i in batch.input_ids[0].tolist()]], [codes.tolist()])
    assert fig.axes[0].collections[0].get_array().shape == (1, 5)
    assert plots.figure_rule_violations(fig) == []


def test_mask_grid_errors():
    with pytest.raises(ValueError, match="one code per shown token"):
        plots.mask_grid([["a", "b"]], [[0]])
    with pytest.raises(ValueError, match="codes must be among"):
        plots.mask_grid([["a"]], [[7]])


def test_masks_per_sequence_hist():
    fig = plots.masks_per_sequence_hist({"bernoulli": [0, 1, 1, 3], "fixed": [2, 2, 2, 2]}, title="h")
    ax = fig.axes[0]
    a, b = ax.containers
    assert [p.get_height() for p in a] == pytest.approx([0.25, 0.5, 0, 0.25])
    assert [p.get_height() for p in b] == pytest.approx([0, 0, 1, 0])
    assert ax.get_xlabel() == "selected positions in the sequence" and ax.get_ylabel() == "fraction of sequences"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bernoulli", "fixed"]
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="none empty"):
        plots.masks_per_sequence_hist({"a": []})


def test_mask_grid_wraps_only_where_a_word_starts_and_columns_fit_their_labels():
    """The whole-word figure of 03_masking: "di ##sa ##pp ##roved" stays in one panel, and 6 rows of 20 pieces fit
    in two panels under 900 px (it was three panels, 1,299 px)."""
    pieces = ["[CLS]", "mrs", ".", "fe", "##rra", "##rs", "di", "##sa", "##pp", "##roved", "of", "photos", "##yn",
              "##thesis", "and", "the", "byzantine", "emperors", ".", "[SEP]"]
    shown = [["[MASK]" if i % 3 == 1 else p for i, p in enumerate(pieces)]] * 6
    codes = [[-1] + [1 if i % 3 == 1 else 0 for i in range(1, 19)] + [-1]] * 6
    fig = plots.mask_grid(shown, codes, original=[pieces] * 6, row_labels=[f"whole-word, seed {s}" for s in range(6)],
                          title="t")
    assert plots.figure_rule_violations(fig) == []
    starts = [int(ax.get_xticklabels()[0].get_text()) for ax in fig.axes]
    assert len(starts) == 2 and all(not pieces[s].startswith("##") for s in starts)
    png = plots.style.notebook_png(fig)
    assert int.from_bytes(png[20:24], "big") <= 900  # the PNG's height
    narrow, wide = (np.diff(fig.axes[0].collections[0].get_coordinates()[0, :, 0])[i] for i in (2, 9))
    assert narrow < wide  # "." gets a narrower column than "[MASK] (##roved)"
    # a word too long for one panel is still cut (inside the word, where it must be)
    fig = plots.mask_grid([["a"] + ["##b"] * 9], [[0] * 10], max_columns=4)
    assert sorted(ax.collections[0].get_array().shape[1] for ax in fig.axes) == [3, 3, 4]


def test_masks_per_sequence_hist_states_how_many_sequences_it_counted():
    counts = {"bernoulli": [0, 1, 1, 3], "fixed": [2, 2, 2, 2]}
    assert plots.masks_per_sequence_hist(counts).axes[0].get_title() == "Positions selected per sequence (4 sequences)"
    fig = plots.masks_per_sequence_hist({"a": [1, 2], "b": [1, 1, 1]})
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["a (2 sequences)", "b (3 sequences)"]


def test_rates_vs_targets_plots_differences_in_points():
    rates = {"selected": {"rate": 0.151, "low": 0.149, "high": 0.153},
             "[MASK]": {"rate": 0.79, "low": 0.78, "high": 0.80}}
    fig = plots.rates_vs_targets(rates, {"selected": 0.15, "[MASK]": 0.8})
    ax = fig.axes[0]
    xs = ax.lines[0].get_xdata()
    assert xs == pytest.approx([0.1, -1.0])
    assert "percentage points" in ax.get_xlabel() and "99.9 % interval" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()][0].startswith("selected: 15.10 %")
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="share no name"):
        plots.rates_vs_targets(rates, {"other": 0.1})


def test_distinct_masks_plot():
    fig = plots.distinct_masks_plot([1, 2, 3], {"static": [1, 2, 2], "dynamic": [1, 2, 3]})
    ax = fig.axes[0]
    assert [list(line.get_ydata()) for line in ax.lines] == [[1, 2, 2], [1, 2, 3]]
    assert ax.get_xlabel() == "epoch" and ax.get_ylabel() == "distinct masks seen so far"
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="one value per epoch"):
        plots.distinct_masks_plot([1, 2], {"static": [1]})


def _contrast(a, b) -> float:
    """WCAG contrast ratio of two matplotlib colours."""
    from matplotlib.colors import to_rgb

    def luminance(colour):
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_text_colour_on_picks_the_more_legible_of_black_and_white():
    assert plots.text_colour_on(plots.OKABE_ITO["orange"]) == "black"  # white on orange is 2.2 : 1
    assert plots.text_colour_on(plots.OKABE_ITO["blue"]) == "white"
    assert plots.text_colour_on("#ffffff") == "black" and plots.text_colour_on("#000000") == "white"


def test_mask_grid_labels_are_legible_and_fit_their_cells():
    """Every label contrasts ≥ 4.5 : 1 with its cell (WCAG AA) and a long one, "[MASK] (byzantine)", stays inside
    its cell (it touched the borders when cells had a fixed width)."""
    shown = [["[CLS]", "the", "[MASK]", "dog", "emperors", "[SEP]"]]
    original = [["[CLS]", "the", "byzantine", "cat", "emperors", "[SEP]"]]
    codes = [[-1, 0, 1, 2, 3, -1]]
    fig = plots.mask_grid(shown, codes, original=original, row_labels=["seed 1"])
    assert plots.figure_rule_violations(fig) == []
    fig.canvas.draw()
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    edges = ax.transData.transform(np.c_[ax.collections[0].get_coordinates()[0, :, 0], np.zeros(7)])[:, 0]
    for text, code, cell_px in zip(ax.texts, codes[0], np.diff(edges), strict=True):
        assert _contrast(text.get_color(), plots.MASK_GRID_COLORS[code][0]) >= 4.5, text.get_text()
        assert text.get_window_extent(renderer).width < 0.95 * cell_px, text.get_text()
