"""plots.language: which language a figure is drawn in, the label table, and the bundled CJK font (no missing
glyphs). Every figure the other test_plots_* modules draw is also drawn in Chinese by tests/conftest.py."""

import hashlib
import io
import json
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from fontTools.ttLib import TTFont

from mlm_course import plots
from mlm_course.plots import language
from mlm_course.plots.zh_labels import ZH_LABELS


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def no_language_set(monkeypatch, tmp_path):
    monkeypatch.delenv(language.LANGUAGE_ENV_VAR, raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_language_is_the_variable_else_the_notebooks_folder(no_language_set, monkeypatch):
    assert plots.figure_language() == "en"
    (no_language_set / "zh").mkdir()
    monkeypatch.chdir(no_language_set / "zh")  # Jupyter and nbconvert start the kernel in the notebook's folder
    assert plots.figure_language() == "zh"
    monkeypatch.setenv(language.LANGUAGE_ENV_VAR, "EN")
    assert plots.figure_language() == "en"
    monkeypatch.delenv(language.LANGUAGE_ENV_VAR)
    monkeypatch.chdir(no_language_set)
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/me/mlm_course/notebooks/zh/03_masking.ipynb")  # JupyterLab
    assert plots.figure_language() == "zh"
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/me/mlm_course/notebooks/03_masking.ipynb")
    assert plots.figure_language() == "en"


def test_an_unknown_language_is_refused_with_the_values_to_use(monkeypatch):
    monkeypatch.setenv(language.LANGUAGE_ENV_VAR, "fr")
    with pytest.raises(ValueError, match=r"MLM_COURSE_LANG='fr': set it to one of en, zh"):
        plots.figure_language()


def test_labels_translate_exactly_or_by_template_with_each_piece_translated():
    assert language.translate("optimiser step") == "优化步"
    assert language.translate("correct (held-out 6.20)") == "正确（留出集 6.20）"
    assert language.translate("all\n(2,364 tokens)") == "全部\n（2,364 个词元）"
    assert language.translate("course − random: ahead in 14 of 15 runs, p = 0.004 after Holm (a difference)") == \
        "课程 − 随机初始化：15 次运行中领先 14 次，Holm 校正后 p = 0.004（有差异）"
    assert language.translate("bert 30k (held-out)") == "bert 30k（留出集）"  # a name kept in English
    assert language.translate("a brand-new label") is None
    assert language.translate("brand-new (held-out 6.20)") is None  # a template does not pass English through
    assert not language.needs_translation("top-1 准确率（%）") and language.needs_translation("baseline")


def _figure_with_every_kind_of_text():
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1], [0, 1], label="held-out set\n(frozen masks)")
    ax.set(title="Static vs dynamic masking", xlabel="optimiser step", ylabel="a brand-new label")
    ax.set_xticks([0, 1], ["static", "dynamic"])
    ax.legend()
    token = ax.text(0.5, 0.5, "static")
    language.mark_as_data(token)
    return fig, ax, token


def test_localise_rewrites_titles_labels_legends_and_ticks_and_names_what_it_cannot():
    plots.use_cjk_font()  # before the figure: its texts take the font families set when they are made
    fig, ax, token = _figure_with_every_kind_of_text()
    assert plots.localise(fig) == ["a brand-new label"]
    assert (ax.get_title(), ax.get_xlabel()) == ("静态掩码与动态掩码", "优化步")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["留出集\n（固定掩码）"]
    fig.canvas.draw()  # tick labels are formatted again at every draw: the table they come from is translated
    assert [t.get_text() for t in ax.get_xticklabels()] == ["静态", "动态"]
    assert token.get_text() == "static"  # data stays as it is


def test_a_figure_function_draws_english_by_default_and_chinese_with_the_cjk_font(no_language_set, monkeypatch):
    curves = {"static": [1, 1, 1], "dynamic": [1, 2, 3]}
    english = plots.distinct_masks_plot(range(1, 4), curves)
    assert english.axes[0].get_title() == "Static vs dynamic masking"
    monkeypatch.setenv(language.LANGUAGE_ENV_VAR, "zh")
    chinese = plots.distinct_masks_plot(range(1, 4), curves)
    assert chinese.axes[0].get_title() == "静态掩码与动态掩码"
    assert matplotlib.rcParams["font.family"][-1] == language.CJK_FAMILY
    plots.use_cjk_font()  # a second call changes nothing
    assert matplotlib.rcParams["font.family"].count(language.CJK_FAMILY) == 1
    with pytest.warns(plots.UntranslatedFigureText, match=r"no Chinese for \['a brand-new title'\]"):
        plots.masks_per_sequence_hist({"fixed": [1, 2]}, title="a brand-new title")


def test_every_character_of_every_chinese_label_is_in_the_latin_font_or_the_bundled_one():
    from matplotlib import font_manager

    cmap = TTFont(language.cjk_font_path()).getBestCmap()
    latin = TTFont(font_manager.findfont("DejaVu Sans")).getBestCmap()  # the first family; the CJK one falls back
    missing = sorted({c for text in ZH_LABELS.values() for c in text
                      if ord(c) not in cmap and ord(c) not in latin and not c.isspace()})
    assert missing == []
    for character in "床前明月光疑是地上霜，。（）：“”、":  # the poem of notebook 10's demo, and CJK punctuation
        assert ord(character) in cmap


def _title_png(text: str) -> np.ndarray:
    fig = plt.figure(figsize=(3, 0.6))
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=14)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font")
        fig.savefig(buffer, format="png", dpi=100)
    return plt.imread(io.BytesIO(buffer.getvalue()))


def test_a_chinese_title_renders_with_real_glyphs_not_missing_glyph_boxes():
    plots.use_cjk_font()
    one, other = _title_png("掩码语言模型"), _title_png("模型语言掩码")  # the same characters, reordered
    assert one.shape == other.shape
    assert (one[..., :3] < 0.5).any()  # ink was drawn
    assert not np.array_equal(one, other)  # boxes for missing glyphs would all look alike
    plt.rcParams["font.family"] = ["DejaVu Sans"]  # without the CJK font, matplotlib warns of every box it draws
    try:
        with pytest.raises(UserWarning, match="missing from font"):
            _title_png("掩码")
    finally:
        plt.rcParams["font.family"] = ["sans-serif"]


def test_the_font_is_the_renamed_subset_its_record_and_licence_describe():
    folder = language.cjk_font_path().parent
    record = json.loads((folder / "sources.json").read_text())
    data = language.cjk_font_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == record["output"]["sha256"] and len(data) == record["output"]["bytes"]
    names = TTFont(language.cjk_font_path())["name"]
    assert names.getDebugName(1) == language.CJK_FAMILY and "Source" not in names.getDebugName(4)
    licence = (folder / "OFL.txt").read_text()
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Reserved Font Name 'Source'" in licence
    assert record["characters"]["gb2312"] == 7445


def test_a_figure_may_mean_a_word_otherwise_than_the_shared_table(monkeypatch):
    """03's measured rates call the random replacement "random"; 07 calls random initialisation that. Each figure
    function named in FIGURE_LABELS exists, and its own table wins over the shared one."""
    from mlm_course.plots.zh_labels import FIGURE_LABELS

    assert all(callable(getattr(plots, name, None)) for name in FIGURE_LABELS)
    monkeypatch.setenv(language.LANGUAGE_ENV_VAR, "zh")
    rates = {name: {"rate": rate, "low": rate - 0.001, "high": rate + 0.001}
             for name, rate in (("selected", 0.15), ("random", 0.1))}
    fig = plots.rates_vs_targets(rates, {"selected": 0.15, "random": 0.1})
    ticks = [label.get_text() for label in fig.axes[0].get_yticklabels()]
    assert any(tick.startswith("随机替换") for tick in ticks) and not any("随机初始化" in tick for tick in ticks)
    assert language.translate("random") == "随机初始化"  # the shared meaning, for the other figures


def test_the_ticks_of_a_secondary_axis_are_translated_too():
    """06's time-to-loss figure names its targets on a secondary y axis, which fig.axes does not list."""
    plots.use_cjk_font()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [7.5, 6.0])
    secondary = ax.secondary_yaxis("right")
    secondary.set_yticks([7.5, 6.0], ["target 7.50", "target 6.00"])
    assert plots.localise(fig) == []
    fig.canvas.draw()
    assert [t.get_text() for t in secondary.get_yticklabels()] == ["目标 7.50", "目标 6.00"]
