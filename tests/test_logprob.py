"""mlm_course.logprob against torch, math/numpy, hand-computed values and brute force."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mlm_course import logprob as L

# ---- hand-computed logarithms (the values the notebook's "common mistakes" section quotes) ----------------


def test_hand_computed_logs():
    assert math.log(0.05) == pytest.approx(-2.995732273553991, abs=1e-15)
    assert math.log10(0.1) == pytest.approx(-1.0, abs=1e-15)
    assert math.isclose(0.1 - 0.01, 0.09)
    assert math.log(0.1) - math.log(0.01) == pytest.approx(2.302585092994046, abs=1e-12)
    assert L.change_log_base(-1.0, 10, math.e) == pytest.approx(math.log(0.1))
    assert L.change_log_base(math.log(0.05), math.e, 10) == pytest.approx(math.log10(0.05))
    assert L.change_log_base(1.0, math.e, 2) == pytest.approx(1 / math.log(2))


@pytest.mark.parametrize("base", [0, 1, -2, True, "e"])
def test_change_log_base_rejects_bad_bases(base):
    with pytest.raises(ValueError, match="positive number other than 1"):
        L.change_log_base(1.0, base, 2)


def test_change_log_base_rejects_non_numbers():
    with pytest.raises(TypeError, match="must be a number"):
        L.change_log_base("1", 2, 10)


# ---- products, sums of logs, underflow ----------------------------------------------------------------------


def test_sequence_probability_and_sum_log_probs():
    probs = [0.2, 0.05, 0.5, 0.1]
    assert L.sequence_probability(probs, torch.float64).item() == pytest.approx(0.0005, rel=1e-15)
    assert L.sum_log_probs(probs, torch.float64).item() == pytest.approx(math.log(0.0005), rel=1e-15)
    assert L.sequence_probability(probs).dtype == torch.float32
    assert L.sum_log_probs(probs, torch.float16).dtype == torch.float16


def test_running_product_rounds_every_step_like_numpy():
    rng = np.random.default_rng(0)
    probs = rng.uniform(0.2, 0.9, size=60)
    for torch_dtype, np_dtype in ((torch.float16, np.float16), (torch.float32, np.float32), (torch.float64, np.float64)):
        acc, expected = np_dtype(1.0), []
        for p in probs.astype(np_dtype):
            acc = np_dtype(acc * p)
            expected.append(float(acc))
        got = L.running_product(probs, torch_dtype).double().numpy()
        np.testing.assert_array_equal(got, np.array(expected))


@pytest.mark.parametrize(
    "dtype,exponent", [(torch.float16, -24), (torch.bfloat16, -133), (torch.float32, -149), (torch.float64, -1074)]
)
def test_smallest_subnormal_is_representable_and_its_half_is_not(dtype, exponent):
    tiny = L.smallest_subnormal(dtype)
    assert tiny == 2.0**exponent
    assert torch.tensor(tiny, dtype=torch.float64).to(dtype).item() == tiny
    assert torch.tensor(tiny / 2, dtype=torch.float64).to(dtype).item() == 0.0  # tie rounds to even = 0


@pytest.mark.parametrize(
    "dtype,expected", [(torch.float16, 25), (torch.bfloat16, 134), (torch.float32, 150), (torch.float64, 1075)]
)
def test_underflow_length_of_one_half_is_exact(dtype, expected):
    # 0.5**n is exact down to the smallest subnormal 2**e; 2**(e-1) is a tie that rounds to even = 0
    assert L.underflow_length(0.5, dtype) == expected


def _brute_force_product(p: float, n: int, dtype: torch.dtype) -> float:
    """Independent check: the product of n copies of p, each multiply rounded to dtype (numpy where possible)."""
    np_dtype = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}.get(dtype)
    if np_dtype is not None:
        acc, q = np_dtype(1.0), np_dtype(p)
        for _ in range(n):
            acc = np_dtype(acc * q)
        return float(acc)
    # bfloat16: exact product in float64 (8-bit significands multiply exactly), then round to bfloat16
    q = torch.tensor(p, dtype=torch.bfloat16).double()
    acc = torch.tensor(1.0, dtype=torch.float64)
    for _ in range(n):
        acc = (acc * q).to(torch.bfloat16).double()
    return acc.item()


@pytest.mark.parametrize("p", [0.5, 0.3, 0.05, 0.01, 1e-3])
@pytest.mark.parametrize("dtype", L.DTYPES)
def test_underflow_length_against_brute_force(p, dtype):
    n = L.underflow_length(p, dtype)
    assert n is not None
    assert _brute_force_product(p, n, dtype) == 0.0
    if n > 1:
        assert _brute_force_product(p, n - 1, dtype) > 0.0
    # the closed-form estimate is close (within rounding effects of a couple of steps)
    assert abs(n - L.underflow_estimate(p, dtype)) < 2.5


def test_underflow_estimate_values():
    assert L.underflow_estimate(0.05, torch.float64) == pytest.approx(math.log(2.0**-1074) / math.log(0.05))
    assert L.underflow_estimate([0.1, 0.001], torch.float32) == pytest.approx(math.log(2.0**-149) / math.log(0.01))
    assert L.underflow_estimate(1.0, torch.float32) == math.inf


def test_underflow_length_of_a_sequence():
    probs = [0.01] * 30
    assert L.underflow_length(probs, torch.float32) == L.underflow_length(0.01, torch.float32) == 23
    assert L.underflow_length(probs[:10], torch.float32) is None  # 1e-20 is still representable
    assert L.underflow_length([0.5, 0.0, 0.5], torch.float64) == 2


def test_underflow_length_never():
    assert L.underflow_length(1.0, torch.float64) is None
    assert L.underflow_length(0.9999, torch.float16) is None  # 0.9999 rounds to 1.0 in float16
    assert L.underflow_length(0.3, torch.float64, max_length=10) is None


def test_underflow_table_rows():
    rows = L.underflow_table(0.5)
    assert [r.dtype for r in rows] == ["float16", "bfloat16", "float32", "float64"]
    assert [r.length for r in rows] == [25, 134, 150, 1075]
    assert [r.estimate for r in rows] == pytest.approx([24, 133, 149, 1074])


def test_log_sum_stays_finite_where_the_product_is_zero():
    probs = torch.full((500,), 0.05, dtype=torch.float64)
    assert L.sequence_probability(probs, torch.float32).item() == 0.0
    s32, s64 = L.sum_log_probs(probs, torch.float32), L.sum_log_probs(probs, torch.float64)
    assert torch.isfinite(s32)
    assert s64.item() == pytest.approx(500 * math.log(0.05), rel=1e-14)
    assert abs(s32.item() - s64.item()) / abs(s64.item()) < 1e-6


# ---- bad input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad,err,match",
    [
        ([0.5, 1.5], ValueError, "must lie in \\[0, 1\\]"),
        ([-0.1], ValueError, "must lie in \\[0, 1\\]"),
        ([0.5, float("nan")], ValueError, "NaN"),
        ([], ValueError, "empty"),
        ([1, 0], TypeError, "floating point"),
        (torch.tensor([1, 0]), TypeError, "floating point"),
        (torch.tensor([True]), TypeError, "floating point"),
        (["a"], TypeError, "must hold numbers"),
    ],
)
@pytest.mark.parametrize(
    "fn", [L.sequence_probability, L.sum_log_probs, L.running_product, L.nll, L.grad_neg_log, L.neg_log_loss]
)
def test_bad_probabilities_are_refused(fn, bad, err, match):
    with pytest.raises(err, match=match):
        fn(bad)


@pytest.mark.parametrize("fn", [L.underflow_length, L.underflow_estimate])
def test_underflow_refuses_bad_p(fn):
    with pytest.raises(ValueError, match="must lie in"):
        fn(1.2, torch.float32)
    with pytest.raises(TypeError, match="floating torch dtype"):
        fn(0.5, torch.int32)


def test_underflow_length_refuses_bad_max_length():
    with pytest.raises(ValueError, match="max_length"):
        L.underflow_length(0.5, torch.float32, max_length=0)


# ---- NLL and cross-entropy ------------------------------------------------------------------------------------


def test_nll_values():
    assert L.nll([0.05]).item() == pytest.approx(2.995732273553991)
    assert L.nll([0.5, 0.25], reduction="sum").item() == pytest.approx(3 * math.log(2))
    assert L.nll([0.0]).item() == math.inf
    with pytest.raises(ValueError, match="reduction"):
        L.nll([0.5], reduction="avg")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(reduction):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 11, generator=g) * 3
    target = torch.randint(0, 11, (7,), generator=g)
    target[2] = -100
    expected = F.cross_entropy(logits, target, reduction=reduction)
    torch.testing.assert_close(L.cross_entropy_manual(logits, target, reduction=reduction), expected)


def test_cross_entropy_custom_ignore_index_and_unbatched():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 4, generator=g, dtype=torch.float64)
    target = torch.tensor([0, 3, 9, 1, 9])
    torch.testing.assert_close(
        L.cross_entropy_manual(logits, target, ignore_index=9), F.cross_entropy(logits, target, ignore_index=9)
    )
    torch.testing.assert_close(
        L.cross_entropy_manual(logits[0], torch.tensor(2)), F.cross_entropy(logits[0], torch.tensor(2))
    )


def test_cross_entropy_all_ignored_is_nan_like_torch():
    logits, target = torch.randn(3, 4, generator=torch.Generator().manual_seed(2)), torch.full((3,), -100)
    assert torch.isnan(F.cross_entropy(logits, target))
    assert torch.isnan(L.cross_entropy_manual(logits, target))


def test_one_hot_cross_entropy_is_nll_of_true_class():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 5, generator=g, dtype=torch.float64)
    target = torch.randint(0, 5, (6,), generator=g)
    one_hot = F.one_hot(target, 5).double()
    by_index = L.cross_entropy_manual(logits, target)
    by_probs = L.cross_entropy_manual(logits, one_hot)
    true_class_probs = torch.softmax(logits, -1)[torch.arange(6), target]
    torch.testing.assert_close(by_index, by_probs)
    torch.testing.assert_close(by_index, L.nll(true_class_probs))
    torch.testing.assert_close(by_probs, F.cross_entropy(logits, one_hot))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_soft_target_cross_entropy_matches_torch(reduction):
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(4, 6, generator=g)
    q = torch.softmax(torch.randn(4, 6, generator=g), -1)
    q[0] = F.one_hot(torch.tensor(2), 6).float()
    torch.testing.assert_close(
        L.cross_entropy_manual(logits, q, reduction=reduction), F.cross_entropy(logits, q, reduction=reduction)
    )


def test_cross_entropy_gradient_matches_torch():
    g = torch.Generator().manual_seed(5)
    a = torch.randn(4, 6, generator=g, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    target = torch.tensor([1, 5, -100, 0])
    L.cross_entropy_manual(a, target).backward()
    F.cross_entropy(b, target).backward()
    torch.testing.assert_close(a.grad, b.grad)


def test_cross_entropy_bad_input():
    logits = torch.randn(3, 4, generator=torch.Generator().manual_seed(6))
    with pytest.raises(ValueError, match="flatten"):
        L.cross_entropy_manual(logits.view(1, 3, 4), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="outside \\[0, 3\\]"):
        L.cross_entropy_manual(logits, torch.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match="shape \\(3,\\)"):
        L.cross_entropy_manual(logits, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="logits' shape"):
        L.cross_entropy_manual(logits, torch.full((3, 5), 0.2))
    with pytest.raises(TypeError, match="must be a tensor"):
        L.cross_entropy_manual(logits, [0, 1, 2])
    with pytest.raises(TypeError, match="not booleans"):
        L.cross_entropy_manual(logits, torch.tensor([True, False, True]))
    with pytest.raises(TypeError, match="floating point"):
        L.cross_entropy_manual(torch.ones(3, 4, dtype=torch.long), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="NaN"):
        L.cross_entropy_manual(torch.full((3, 4), float("nan")), torch.tensor([0, 1, 2]))


# ---- softmax and log-sum-exp --------------------------------------------------------------------------------


def test_naive_softmax_overflows_and_stable_does_not():
    x = torch.tensor([1000.0, 999.0, 0.0])
    assert torch.isnan(L.naive_softmax(x)).any()
    torch.testing.assert_close(L.stable_softmax(x), torch.softmax(x, -1))
    y = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(L.naive_softmax(y), torch.softmax(y, -1))


def test_logsumexp_special_values_match_torch():
    ninf, inf = float("-inf"), float("inf")
    for x in ([ninf, ninf], [inf, 1.0], [ninf, 0.0], [1e30, 1e30], [-1e30, -1e30]):
        t = torch.tensor(x, dtype=torch.float64)
        torch.testing.assert_close(L.logsumexp(t), torch.logsumexp(t, 0))


def test_logsumexp_dims_and_keepdim():
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(7))
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            torch.testing.assert_close(L.logsumexp(x, dim, keepdim), torch.logsumexp(x, dim, keepdim))
        torch.testing.assert_close(L.log_softmax(x, dim), torch.log_softmax(x, dim))
        torch.testing.assert_close(L.stable_softmax(x, dim), torch.softmax(x, dim))


def test_softmax_helpers_refuse_integer_logits():
    for fn in (L.naive_softmax, L.stable_softmax, L.logsumexp, L.log_softmax):
        with pytest.raises(TypeError, match="floating point"):
            fn(torch.tensor([1, 2, 3]))


finite = st.floats(min_value=-1e30, max_value=1e30, allow_nan=False, allow_infinity=False)
logit_lists = st.lists(finite, min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(logit_lists)
def test_logsumexp_is_finite_and_matches_the_shifted_computation(values):
    x = torch.tensor(values, dtype=torch.float64)
    out = L.logsumexp(x)
    assert torch.isfinite(out)
    m = max(values)
    shifted = m + math.log(sum(math.exp(v - m) for v in values))
    assert out.item() == pytest.approx(shifted, rel=1e-12, abs=1e-12)
    torch.testing.assert_close(out, torch.logsumexp(x, 0))
    assert m <= out.item() <= m + math.log(len(values)) + 1e-9 * max(1.0, abs(m))


@settings(max_examples=200, deadline=None)
@given(logit_lists)
def test_log_softmax_exponentiates_to_a_distribution(values):
    x = torch.tensor(values, dtype=torch.float64)
    logp = L.log_softmax(x)
    assert (logp <= 0).all()
    assert torch.exp(logp).sum().item() == pytest.approx(1.0, abs=1e-12)
    torch.testing.assert_close(logp, torch.log_softmax(x, 0))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=1, max_size=12), st.floats(-1e6, 1e6))
def test_softmax_and_log_softmax_are_invariant_to_adding_a_constant(values, c):
    x = torch.tensor(values, dtype=torch.float64)
    torch.testing.assert_close(L.log_softmax(x + c), L.log_softmax(x), atol=1e-9, rtol=0)
    torch.testing.assert_close(L.stable_softmax(x + c), L.stable_softmax(x), atol=1e-9, rtol=0)
    assert L.logsumexp(x + c).item() == pytest.approx(L.logsumexp(x).item() + c, abs=1e-9)


# ---- perplexity and bits -------------------------------------------------------------------------------------


def test_perplexity_and_bits():
    assert L.perplexity(math.log(50)) == pytest.approx(50)
    assert L.perplexity(torch.tensor(0.0)) == 1.0
    assert L.bits_per_token(math.log(2)) == pytest.approx(1.0)
    assert L.bits_per_token(math.log(1024)) == pytest.approx(10.0)
    # perplexity of a uniform model over V words is V
    v = 37
    assert L.perplexity(L.nll(torch.full((5,), 1 / v, dtype=torch.float64))) == pytest.approx(v)


def test_perplexity_bad_input():
    with pytest.raises(ValueError, match=">= 0"):
        L.perplexity(-1.0)
    with pytest.raises(ValueError, match="NaN"):
        L.bits_per_token(float("nan"))
    with pytest.raises(TypeError, match="must be a number"):
        L.perplexity("2.0")
    with pytest.raises(ValueError, match="single number"):
        L.perplexity(torch.tensor([1.0, 2.0]))


# ---- gradients of the two losses --------------------------------------------------------------------------------


def test_loss_gradients_match_autograd():
    p = torch.tensor([1e-4, 0.01, 0.3, 0.9, 1.0], dtype=torch.float64, requires_grad=True)
    (g_log,) = torch.autograd.grad((-torch.log(p)).sum(), p)
    (g_lin,) = torch.autograd.grad((1 - p).sum(), p)
    torch.testing.assert_close(L.grad_neg_log(p.detach()), g_log)
    torch.testing.assert_close(L.grad_linear_loss(p.detach()), g_lin)
    torch.testing.assert_close(L.neg_log_loss(p.detach()), -torch.log(p.detach()))
    torch.testing.assert_close(L.linear_loss(p.detach()), 1 - p.detach())
    assert L.grad_neg_log([1e-4]).item() == pytest.approx(-1e4)


def test_logit_gradients_match_autograd():
    z = torch.tensor([[-6.0, 2.0, 1.0], [0.0, 0.0, 0.0], [5.0, -1.0, 0.5]], dtype=torch.float64, requires_grad=True)
    y = 0
    p = torch.softmax(z, -1)[:, y]
    (g_log,) = torch.autograd.grad((-torch.log(p)).sum(), z, retain_graph=True)
    (g_lin,) = torch.autograd.grad((1 - p).sum(), z)
    torch.testing.assert_close(L.grad_logit_neg_log(p.detach()), g_log[:, y])
    torch.testing.assert_close(L.grad_logit_linear(p.detach()), g_lin[:, y])
    # a confident mistake (p ≈ 3e-4): the log loss still pushes with ≈ 1, the linear loss with ≈ 3e-4
    assert abs(L.grad_logit_neg_log(p.detach())[0].item()) > 0.99
    assert abs(L.grad_logit_linear(p.detach())[0].item()) < 1e-3
