"""Shared fixtures: a tiny BERT (the course's own, :class:`mlm_course.bert.BertMLM`) on the shipped bert-base-uncased
vocab, built in milliseconds."""

import pytest
import torch
from transformers import BertConfig

from mlm_course import tokenization
from mlm_course.bert import BertMLM

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


@pytest.fixture(scope="session")
def bert_tok():
    return tokenization.bert_tokenizer()


@pytest.fixture
def tiny_model(bert_tok):
    def build(seed: int = 0, **overrides) -> BertMLM:
        torch.manual_seed(seed)
        config = BertConfig(vocab_size=len(bert_tok), max_position_embeddings=64, pad_token_id=bert_tok.pad_token_id,
                            **{**TINY, **overrides})
        return BertMLM(config)

    return build


@pytest.fixture(scope="session")
def sample_text():
    return (
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
        "must be in want of a wife. However little known the feelings or views of such a man may be "
        "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
        "surrounding families, that he is considered the rightful property of some one or other of "
        "their daughters. "
    ) * 8


@pytest.fixture
def one_torch_thread():
    """Two busy cores: one torch thread per test process is faster than two fighting threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)



@pytest.fixture
def fail_forward():
    """``fail_forward(model)`` makes every forward pass of ``model`` raise (as an out-of-memory error would) and
    returns the list recording whether the model was in train mode at each attempted forward pass."""

    def apply(model):
        seen = []

        def fail(module, args, kwargs):
            seen.append(module.training)
            raise RuntimeError("simulated out of memory")

        model.register_forward_pre_hook(fail, with_kwargs=True)
        return seen

    return apply


@pytest.fixture(scope="session")
def course_tok():
    """The course's own WordPiece tokenizer (8k vocabulary), shipped in the package."""
    return tokenization.course_tokenizer()


@pytest.fixture
def small_bert(course_tok):
    """A BERT of the ``TINY`` shape on the course vocabulary: ``small_bert(seed, max_length)``."""
    from mlm_course import models

    def build(seed: int = 0, max_length: int = 64) -> BertMLM:
        torch.manual_seed(seed)
        return BertMLM(models.build_config("tiny", course_tok, max_positions=max_length, **TINY))

    return build



def _recording(function, calls: list):
    """``function``, also noting each call that returns a figure: (function, args, kwargs, figure)."""
    from matplotlib.figure import Figure

    def record(*args, **kwargs):
        fig = function(*args, **kwargs)
        if isinstance(fig, Figure):
            calls.append((function, args, kwargs, fig))
        return fig

    return record


def _check_the_chinese_figure(monkeypatch, function, args, kwargs, english) -> None:
    """Draw ``function(*args, **kwargs)`` in Chinese and render it as the notebook would."""
    import warnings

    import matplotlib.pyplot as plt

    from mlm_course.plots import figure_rule_violations, language

    monkeypatch.setenv(language.LANGUAGE_ENV_VAR, "zh")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = function(*args, **kwargs)
        problems = figure_rule_violations(fig)  # renders the notebook's PNG, so glyphs are looked up
    monkeypatch.delenv(language.LANGUAGE_ENV_VAR)
    messages = [str(w.message) for w in caught
                if issubclass(w.category, language.UntranslatedFigureText) or "missing from font" in str(w.message)]
    assert messages == [], f"{function.__name__} in Chinese: {messages}"
    if problems:
        assert problems == figure_rule_violations(english), f"{function.__name__} in Chinese: {problems}"
    plt.close(fig)


@pytest.fixture(autouse=True)
def _every_figure_also_in_chinese(request, monkeypatch):
    """In the figure tests (test_plots_*.py), every figure a test draws through ``mlm_course.plots`` is drawn
    again in Chinese (MLM_COURSE_LANG=zh), as the 中文版 shows it: no label left in English, no character
    missing from the font, and no figure rule broken that the English figure keeps."""
    if not request.module.__name__.startswith("test_plots_") or request.module.__name__ == "test_plots_language":
        yield
        return
    from mlm_course import plots

    calls = []
    for name in plots.__all__:
        function = getattr(plots, name)
        if hasattr(function, "__wrapped__"):  # the figure functions, wrapped by language.localised
            monkeypatch.setattr(plots, name, _recording(function, calls))
    yield
    for function, args, kwargs, english in calls:
        _check_the_chinese_figure(monkeypatch, function, args, kwargs, english)


@pytest.fixture(autouse=True)
def _one_accelerate_state_per_test():
    """Accelerate keeps one precision and device per process (a second one is refused); a test process runs many
    tests, so each test starts with none — what accelerate's own tests do (``AccelerateTestCase.tearDown``)."""
    yield
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
