"""plots for 02_tokens: axes, labels and the plotted shares."""

import pytest
from matplotlib.figure import Figure

from mlm_course import plots

COUNTS = {
    ("austen", "a"): {1: 6, 2: 2, 3: 1, 7: 1},
    ("austen", "b"): {1: 1},
    ("wiki", "a"): {1: 1, 2: 1},
    ("wiki", "b"): {1: 3, 2: 1},
}


def test_pieces_per_word_dots_one_panel_per_source_one_series_per_tokenizer():
    fig = plots.pieces_per_word_dots(COUNTS, max_pieces=3)
    assert isinstance(fig, Figure)
    austen, wiki = fig.axes
    assert [austen.get_title(), wiki.get_title()] == ["austen (held-out)", "wiki (held-out)"]
    assert austen.get_xlabel() == "pieces per word" and "share of running words" in austen.get_ylabel()
    assert austen.get_yscale() == "log"
    assert [t.get_text() for t in austen.get_xticklabels()] == ["1", "2", "3+"]
    a, b = austen.get_lines()
    assert list(a.get_ydata()) == pytest.approx([0.6, 0.2, 0.2])  # 3+ pools the 3- and 7-piece words
    assert list(b.get_ydata()) == pytest.approx([1.0])  # a zero share has no place on a log axis: not drawn
    assert list(wiki.get_lines()[1].get_ydata()) == pytest.approx([0.75, 0.25])
    # the two tokenizers sit side by side around each tick, in the same colour in every panel
    assert a.get_xdata()[0] < 1 < b.get_xdata()[0]
    assert a.get_color() == wiki.get_lines()[0].get_color() != b.get_color()
    assert [t.get_text() for t in wiki.get_legend().get_texts()] == ["a", "b"]
    assert plots.figure_rule_violations(fig) == []


def test_pieces_per_word_dots_errors():
    with pytest.raises(ValueError, match="empty"):
        plots.pieces_per_word_dots({})
    with pytest.raises(ValueError, match="holds no words"):
        plots.pieces_per_word_dots({("s", "a"): {}})
    with pytest.raises(ValueError, match="max_pieces"):
        plots.pieces_per_word_dots({("s", "a"): {1: 1}}, max_pieces=1)
    with pytest.raises(ValueError, match=r"\(source, tokenizer name\)"):
        plots.pieces_per_word_dots({"a": {1: 1}})
