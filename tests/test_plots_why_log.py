"""The figures of notebook 01_why_log: axes, labels and the plotted data."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from mlm_course import logprob, plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_token_log_prob_bars():
    fig = plots.token_log_prob_bars(["the", "cat", "zzz"], [0.5, 0.25, 0.0])
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    widths = [bar.get_width() for bar in ax.patches]
    assert widths[:2] == pytest.approx([math.log(2), math.log(4)])
    assert widths[2] > widths[1]  # the infinite surprisal is drawn capped, not dropped
    ticks = dict(zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()], strict=True))
    assert [ticks[y] for y in (2, 1, 0)] == ["'the'", "'cat'", "'zzz'"]  # first token at the top
    assert "nats" in ax.get_xlabel()
    assert "inf" in ax.get_title()
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="one probability per token"):
        plots.token_log_prob_bars(["a"], [0.5, 0.5])


def test_underflow_curves_constant_p():
    probs = torch.full((300,), 0.05, dtype=torch.float64)
    fig = plots.underflow_curves(probs, title="p = 0.05")
    (ax,) = fig.axes
    assert ax.get_title() == "p = 0.05"
    assert "log10" in ax.get_ylabel() and "length" in ax.get_xlabel()
    assert ax.get_xscale() == "log"  # n = 6, 32, 35 and 249 on one axis without squeezing the first three
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[1:] == [
        "float16: 0.0 at n = 6",
        "bfloat16: 0.0 at n = 32",
        "float32: 0.0 at n = 35",
        "float64: 0.0 at n = 249",
    ]
    exact = ax.get_lines()[0]
    np.testing.assert_allclose(exact.get_ydata()[:3], np.log10(0.05) * np.arange(1, 4))
    # the float32 curve holds the float32 running product, and stops before it becomes 0
    f32 = next(line for line in ax.get_lines() if line.get_label().startswith("float32"))
    expected = np.log10(logprob.running_product(probs[:34], torch.float32).double().numpy())
    np.testing.assert_allclose(f32.get_ydata(), expected)
    # one × per dtype at the exact value where the product became 0, in that dtype's colour
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert [int(c.get_xdata()[0]) for c in crosses] == [6, 32, 35, 249]
    assert crosses[3].get_ydata()[0] == pytest.approx(249 * math.log10(0.05))
    assert [c.get_color() for c in crosses] == list(plots.DTYPE_COLORS.values())
    # each break point also has a vertical line and a written label of its own
    verticals = [line for line in ax.get_lines() if list(line.get_xdata()) == [line.get_xdata()[0]] * 2
                 and line.get_xdata()[0] > 1]
    assert sorted(int(v.get_xdata()[0]) for v in verticals) == [6, 32, 35, 249]
    assert [t.get_text() for t in ax.texts] == ["float16: n = 6", "bfloat16: n = 32", "float32: n = 35",
                                                "float64: n = 249"]
    assert plots.figure_rule_violations(fig) == []


def test_underflow_curves_never_zero():
    fig = plots.underflow_curves([0.9] * 20, dtypes=[torch.float64])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[1] == "float64: never 0.0 here"
    assert len(fig.axes[0].texts) == 0  # no break point, nothing to label
    assert plots.figure_rule_violations(fig) == []


def test_gd_vs_counts():
    pc = np.array([0.5, 0.3, 0.2])
    pg = np.array([0.49, 0.31, 0.2])
    history = [1.5, 1.2, 1.05, 1.03]
    mle_nll = float(-(pc * np.log(pc)).sum())
    fig = plots.gd_vs_counts(history, mle_nll, pc, pg)
    a, b = fig.axes
    np.testing.assert_allclose(a.get_lines()[0].get_ydata(), np.maximum(np.array(history) - mle_nll, 1e-16))
    assert a.get_yscale() == "log" and "step" in a.get_xlabel()
    np.testing.assert_allclose(b.get_lines()[0].get_xdata(), pc)
    np.testing.assert_allclose(b.get_lines()[0].get_ydata(), pg)
    assert "counting" in b.get_xlabel() and "gradient descent" in b.get_ylabel()
    assert plots.figure_rule_violations(fig) == []
    with pytest.raises(ValueError, match="same length"):
        plots.gd_vs_counts(history, mle_nll, pc, pg[:2])


def test_loss_gradients():
    fig = plots.loss_gradients(num=50)
    assert len(fig.axes) == 3
    p = torch.logspace(-4, 0, 50, dtype=torch.float64).numpy()
    loss_ax, grad_ax, logit_ax = fig.axes
    np.testing.assert_allclose(loss_ax.get_lines()[0].get_ydata(), -np.log(p))
    np.testing.assert_allclose(loss_ax.get_lines()[1].get_ydata(), 1 - p)
    np.testing.assert_allclose(grad_ax.get_lines()[0].get_ydata(), 1 / p)
    np.testing.assert_allclose(grad_ax.get_lines()[1].get_ydata(), np.ones_like(p))
    np.testing.assert_allclose(logit_ax.get_lines()[0].get_ydata(), 1 - p)
    np.testing.assert_allclose(logit_ax.get_lines()[1].get_ydata(), p * (1 - p))
    assert all(ax.get_xscale() == "log" for ax in fig.axes)
    assert [line.get_label() for line in loss_ax.get_lines()] == ["−ln p", "1 − p"]
    assert plots.figure_rule_violations(fig) == []


def test_linear_vs_log_distance():
    fig = plots.linear_vs_log_distance((0.1, 0.01))
    lin, log = fig.axes
    np.testing.assert_allclose(lin.get_lines()[0].get_xdata(), [0.1, 0.01])
    np.testing.assert_allclose(log.get_lines()[0].get_xdata(), [math.log(0.1), math.log(0.01)])
    assert lin.get_title() == "gaps between neighbours: linear 0.09;  ln 2.30 nats"
    assert plots.figure_rule_violations(fig) == []
    # the title is computed: equal ratios give equal log gaps, while the linear gaps shrink tenfold
    fig = plots.linear_vs_log_distance((1.0, 0.1, 0.01, 0.001))
    assert fig.axes[0].get_title() == "gaps between neighbours: linear 0.9, 0.09, 0.009;  ln 2.30, 2.30, 2.30 nats"
    assert plots.figure_rule_violations(fig) == []
    assert "0.5, 0.25;  ln 0.69, 0.69" in plots.linear_vs_log_distance((1.0, 0.5, 0.25)).axes[0].get_title()
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        plots.linear_vs_log_distance((0.0, 0.1))
