"""plots for 02_tokens: axes, labels and the plotted fractions."""

import pytest
from matplotlib.figure import Figure

from mlm_course import plots


def test_pieces_per_word_bars():
    fig = plots.pieces_per_word_bars({"a": {1: 6, 2: 2, 3: 1, 7: 1}, "b": {1: 1}}, max_pieces=3)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "pieces per word" and ax.get_ylabel() == "fraction of running words"
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3+"]
    a, b = ax.containers
    assert [p.get_height() for p in a] == pytest.approx([0.6, 0.2, 0.2])
    assert [p.get_height() for p in b] == pytest.approx([1.0, 0.0, 0.0])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]


def test_pieces_per_word_bars_errors():
    with pytest.raises(ValueError, match="empty"):
        plots.pieces_per_word_bars({})
    with pytest.raises(ValueError, match="holds no words"):
        plots.pieces_per_word_bars({"a": {}})
    with pytest.raises(ValueError, match="max_pieces"):
        plots.pieces_per_word_bars({"a": {1: 1}}, max_pieces=1)
