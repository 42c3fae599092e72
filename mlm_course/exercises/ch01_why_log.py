"""Exercises of notebook 01_why_log: log-probabilities, perplexity, underflow, log-softmax, the gradient."""

from __future__ import annotations

import math

import torch

from mlm_course.exercises import Exercise, multiple_choice, numeric, register

# ---- 01.1: the log-probability of a sentence ---------------------------------------------------------------------
_PROBS = (0.2, 0.05, 0.5, 0.1)  # a model's probabilities for the 4 tokens of a sentence
_LOGP_11 = sum(math.log(p) for p in _PROBS)  # ln 0.0005 = -7.6009...

numeric(
    "01.1",
    f"A model gives the 4 tokens of a sentence the probabilities {_PROBS}. What is ln p(sentence), in nats?",
    _LOGP_11,
    wrong={
        math.log10(math.prod(_PROBS)):
            "that is log10 (base 10). The course works in nats: use math.log (natural log), not math.log10.",
        math.log2(math.prod(_PROBS)): "that is log2 (bits). The question asks for nats: use math.log.",
        -_LOGP_11: "that is the negative log-likelihood; a log-probability of a probability < 1 is negative.",
        math.prod(_PROBS): "that is the probability itself (the product); take its natural log, or sum the logs.",
        _LOGP_11 / len(_PROBS): "that is the mean log-probability per token; the sentence's log-probability is the sum.",
    },
    fallback="sum math.log(p) over the four token probabilities.",
)

# ---- 01.2: perplexity -------------------------------------------------------------------------------------------
_NLL_MEAN = -_LOGP_11 / len(_PROBS)
_PPL_12 = math.exp(_NLL_MEAN)  # = 0.0005 ** (-1/4) = 6.687...

numeric(
    "01.2",
    f"What is the perplexity of the model on that sentence (token probabilities {_PROBS})?",
    _PPL_12,
    wrong={
        math.exp(-_LOGP_11):
            "you exponentiated the summed NLL; perplexity is exp of the *mean* NLL per token (divide by 4 first).",
        _NLL_MEAN: "that is the mean NLL in nats; perplexity is exp(mean NLL).",
        _NLL_MEAN / math.log(2): "that is bits per token; perplexity is exp(mean NLL in nats) = 2 ** (bits per token).",
        (2**_NLL_MEAN, 10**_NLL_MEAN):
            "mixed bases: the mean NLL is in nats, so exponentiate with e (math.exp), not 2 or 10.",
        1 / (sum(_PROBS) / len(_PROBS)):
            "1 / (arithmetic mean of p) is not perplexity; perplexity is 1 / (geometric mean of p) = exp(mean NLL).",
    },
    fallback="compute the mean of −ln p over the 4 tokens, then math.exp of it.",
)

# ---- 01.3: where 0.25 ** n underflows in bfloat16 -------------------------------------------------------------
# The notebook prints the answer for 0.5 (n = 134: 2**-134 is half of bfloat16's smallest subnormal 2**-133, a tie
# that rounds to even, i.e. to 0). 0.25 = 0.5**2, so 0.25**n = 2**(-2n): 2**-132 at n = 66 is still > 0, and
# 2**-134 at n = 67 is that same tie.
_N_13 = 67

numeric(
    "01.3",
    "At which sequence length n does the running product 0.25 · 0.25 · … (n factors), computed in bfloat16, "
    "first become exactly 0.0? Reason it out from the p = 0.5 row of the table, then verify.",
    _N_13,
    wrong={
        134: "134 is the length for p = 0.5; each factor 0.25 = 0.5**2 halves the product twice.",
        66: ("0.25**66 = 2**-132 is still above bfloat16's smallest subnormal 2**-133, so it is not 0 yet; "
                    "one more factor gives 2**-134."),
        68: ("2**-134 (n = 67) is exactly half of the smallest subnormal 2**-133: a tie, and round-half-to-even "
                    "sends it to the even neighbour, 0 — not up to 2**-133."),
        (63, 64): "2**-126 is bfloat16's smallest *normal* number; subnormals go further down, to 2**-133.",
        (75, 13, 538): ("that is the answer for another dtype (float32: 2**-149, float16: 2**-24, float64: 2**-1074); "
                        "bfloat16 keeps float32's exponent range but only 7 fraction bits, so its subnormals stop at "
                        "2**-133."),
    },
    not_whole=("a sequence length is a whole number: 0.25**n = 2**(-2n) jumps two halvings per factor, so ask "
               "which whole n first lands at or below half of 2**-133."),
    fallback="write 0.25**n as a power of two and compare it with bfloat16's smallest subnormal, 2**-133.",
)

# ---- 01.4: a stable log-softmax ---------------------------------------------------------------------------------
_TEST_LOGITS = (
    torch.tensor([1.0, 2.0, 3.0]),
    torch.tensor([1000.0, 999.0, 0.0]),
    torch.tensor([-1000.0, -1001.0, -1003.0]),
    torch.tensor([[500.0, 0.0, -500.0, 1.0], [1.0, 2.0, 3.0, 4.0]]),
)


def _grade_14(answer) -> str | None:
    if not callable(answer):
        return "pass a function, e.g. def my_log_softmax(x): ...; check('01.4', my_log_softmax)."
    for x in _TEST_LOGITS:
        try:
            got = answer(x.clone())
        except RuntimeError as exc:
            return (f"it fails on input of shape {tuple(x.shape)} ({exc}): take the max and the sum over dim=-1 "
                    "with keepdim=True so they broadcast against each row.")
        if not isinstance(got, torch.Tensor):
            return "the function must return a tensor (of the same shape as its input)."
        if got.shape != x.shape:
            return (f"for input shape {tuple(x.shape)} it returned shape {tuple(got.shape)}: reduce over the last "
                    "dim with keepdim=True so the subtraction broadcasts per row.")
        if not torch.isfinite(got).all() and torch.isfinite(torch.log_softmax(x, -1)).all():
            return (f"it returns inf/nan for logits {x.tolist()}: subtract the maximum logit (per row) before "
                    "exponentiating.")
        if (got > 1e-6).any():
            return "log-probabilities are ≤ 0: did you return the softmax instead of its log?"
        if not torch.allclose(got, torch.log_softmax(x, -1), atol=1e-5):
            return (f"wrong values for logits {x.tolist()}; log_softmax(x) = x − m − ln Σ exp(x − m) with m the "
                    "per-row maximum.")
    return None


def _solution_14():
    def log_softmax(x):
        m = x.amax(dim=-1, keepdim=True)
        return x - m - torch.log(torch.exp(x - m).sum(dim=-1, keepdim=True))

    return log_softmax


def _mean_shifted(x):
    m = x.mean(dim=-1, keepdim=True)
    return x - m - torch.log(torch.exp(x - m).sum(dim=-1, keepdim=True))


register(Exercise(
    id="01.4",
    prompt="Write log_softmax(x) over the last dim that stays finite for logits like [1000, 999, 0] "
    "and works row-wise on 2-D input (no torch.log_softmax / torch.logsumexp).",
    grade=_grade_14,
    solution=_solution_14,
    wrong_answers=(
        lambda x: torch.log(torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)),  # naive: overflows
        _mean_shifted,  # shifting by the mean leaves exp(1000 - 666) = inf
        lambda x: x - x.max() - torch.log(torch.exp(x - x.max()).sum(-1)),  # forgets keepdim / per-row max
        lambda x: torch.softmax(x, -1),  # the softmax, not its log
        0.5,
    ),
))

# ---- 01.5: the gradient of the mean cross-entropy w.r.t. the logits --------------------------------------------
_LOGITS_15 = torch.tensor([[2.0, 1.0, 0.1], [0.5, 0.5, 3.0]], dtype=torch.float64)
_TARGET_15 = torch.tensor([0, 1])


def _solution_15() -> torch.Tensor:
    one_hot = torch.nn.functional.one_hot(_TARGET_15, 3).double()
    return (torch.softmax(_LOGITS_15, -1) - one_hot) / len(_TARGET_15)


def _wrong_15() -> tuple[tuple[torch.Tensor, str], ...]:
    """The common wrong gradients, each with its hint (the grader tries them in this order)."""
    ref, probs, n = _solution_15(), torch.softmax(_LOGITS_15, -1), len(_TARGET_15)
    flipped = "the sign is flipped: the gradient of the loss is softmax − one_hot (descent then lowers it)."
    no_target = "you forgot to subtract the one-hot target: ∂loss/∂z = (softmax(z) − one_hot(y)) / N."
    return ((ref * n, "that is the gradient of the *summed* loss; reduction='mean' divides by the batch size (2)."),
            (-ref, flipped), (-ref * n, flipped), (probs, no_target), (probs / 2, no_target))


_WRONG_15 = _wrong_15()


def _grade_15(answer) -> str | None:
    a = torch.as_tensor(answer, dtype=torch.float64)
    ref = _solution_15()
    if a.shape != ref.shape:
        return f"the gradient has the logits' shape {tuple(ref.shape)}; yours has shape {tuple(a.shape)}."
    if torch.allclose(a, ref, atol=1e-4):
        return None
    return next((hint for wrong, hint in _WRONG_15 if torch.allclose(a, wrong, atol=1e-4)),
                "use ∂/∂z of −log softmax(z)_y = softmax(z) − one_hot(y), averaged over the batch; check with "
                "autograd: F.cross_entropy(z, y).backward().")


register(Exercise(
    id="01.5",
    prompt="For logits [[2, 1, 0.1], [0.5, 0.5, 3]] and targets [0, 1], give the gradient of "
    "F.cross_entropy(logits, targets) (mean reduction) with respect to the logits, as a 2×3 tensor.",
    grade=_grade_15,
    solution=_solution_15,
    wrong_answers=(*(wrong for wrong, _ in _WRONG_15), torch.zeros(3), torch.zeros(2, 3)),
))

# ---- 01.6: explain why the log loss learns from confident mistakes -------------------------------------------
multiple_choice(
    "01.6",
    "A classifier is trained with the squared error between its softmax probabilities and the one-hot target, "
    "Σ_k (p_k − y_k)², instead of the cross-entropy. Examples it gets confidently wrong (true class p = 0.0001) "
    "barely improve from step to step, while examples with p ≈ 0.5 improve quickly. Why?",
    {
        "a": "The squared error of a confidently wrong example is small, since every p_k and y_k lies between 0 and "
             "1, so it adds little to the loss and so gets little of the update.",
        "b": "A probability of 0.0001 underflows in float32 once the loss squares it (1e-8), so most of the gradient "
             "through the true class is rounded away to zero.",
        "c": "The learning rate is too small for them: raising it 1,000-fold would correct the confidently wrong "
             "examples as fast as the others, at no cost to the rest.",
        "d": "Through the softmax, the squared error's gradient on the true class's logit carries a factor p, so it "
             "fades as p → 0; cross-entropy's there is p − 1 ≈ −1.",
    },
    "d",
    {
        "a": "it is near its largest possible value (about 2 when all the probability sits on one wrong class); and "
             "a loss's value moves no weight anyway, its gradient with respect to the logits does.",
        "b": "float32 represents numbers down to about 1e-45; underflow comes from multiplying *many* probabilities "
             "(section 2), not from one of 0.0001 or its square.",
        "c": "the learning rate scales every example's update alike: the ratio between a confidently wrong and an "
             "uncertain example stays the same, and the examples already right would take steps 1,000× too large.",
    },
)
