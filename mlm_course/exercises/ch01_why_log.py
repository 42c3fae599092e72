"""Exercises of notebook 01_why_log: log-probabilities, perplexity, underflow, log-softmax, the gradient."""

from __future__ import annotations

import math

import torch

from mlm_course.exercises import Exercise, Text, multiple_choice, numeric, register

# ---- 01.1: the log-probability of a sentence ---------------------------------------------------------------------
_PROBS = (0.2, 0.05, 0.5, 0.1)  # a model's probabilities for the 4 tokens of a sentence
_LOGP_11 = sum(math.log(p) for p in _PROBS)  # ln 0.0005 = -7.6009...

numeric(
    "01.1",
    Text(f"A model gives the 4 tokens of a sentence the probabilities {_PROBS}. What is ln p(sentence), in nats?",
         f"一个模型给某个句子的 4 个词元的概率分别是 {_PROBS}。ln p(句子) 是多少（单位：奈特）？"),
    _LOGP_11,
    wrong={
        math.log10(math.prod(_PROBS)):
            Text("that is log10 (base 10). The course works in nats: use math.log (natural log), not math.log10.",
                 "这是 log10（以 10 为底）。本课程以奈特为单位：用 math.log（自然对数），不要用 math.log10。"),
        math.log2(math.prod(_PROBS)): Text("that is log2 (bits). The question asks for nats: use math.log.",
                                           "这是 log2（比特）。题目要的是奈特：用 math.log。"),
        -_LOGP_11: Text("that is the negative log-likelihood; a log-probability of a probability < 1 is negative.",
                        "这是负对数似然；小于 1 的概率，其对数概率是负数。"),
        math.prod(_PROBS): Text("that is the probability itself (the product); take its natural log, or sum the logs.",
                                "这是概率本身（乘积）；对它取自然对数，或者把各个对数相加。"),
        _LOGP_11 / len(_PROBS): Text("that is the mean log-probability per token; the sentence's log-probability is the sum.",
                                     "这是每个词元的平均对数概率；句子的对数概率是总和。"),
    },
    fallback=Text("sum math.log(p) over the four token probabilities.", "对四个词元的概率求 math.log(p) 之和。"),
)

# ---- 01.2: perplexity -------------------------------------------------------------------------------------------
_NLL_MEAN = -_LOGP_11 / len(_PROBS)
_PPL_12 = math.exp(_NLL_MEAN)  # = 0.0005 ** (-1/4) = 6.687...

numeric(
    "01.2",
    Text(f"What is the perplexity of the model on that sentence (token probabilities {_PROBS})?",
         f"模型在这个句子上的困惑度是多少（各词元的概率为 {_PROBS}）？"),
    _PPL_12,
    wrong={
        math.exp(-_LOGP_11):
            Text("you exponentiated the summed NLL; perplexity is exp of the *mean* NLL per token (divide by 4 first).",
                 "你对 NLL 的总和取了指数；困惑度是每个词元*平均* NLL 的 exp（先除以 4）。"),
        _NLL_MEAN: Text("that is the mean NLL in nats; perplexity is exp(mean NLL).",
                        "这是以奈特为单位的平均 NLL；困惑度是 exp(平均 NLL)。"),
        _NLL_MEAN / math.log(2): Text("that is bits per token; perplexity is exp(mean NLL in nats) = 2 ** (bits per token).",
                                      "这是每个词元的比特数；困惑度是 exp(以奈特计的平均 NLL) = 2 ** (每个词元的比特数)。"),
        (2**_NLL_MEAN, 10**_NLL_MEAN):
            Text("mixed bases: the mean NLL is in nats, so exponentiate with e (math.exp), not 2 or 10.",
                 "底数混用了：平均 NLL 以奈特为单位，所以要以 e 为底取指数（math.exp），不是 2 或 10。"),
        1 / (sum(_PROBS) / len(_PROBS)):
            Text("1 / (arithmetic mean of p) is not perplexity; perplexity is 1 / (geometric mean of p) = exp(mean NLL).",
                 "1 / (p 的算术平均) 不是困惑度；困惑度是 1 / (p 的几何平均) = exp(平均 NLL)。"),
    },
    fallback=Text("compute the mean of −ln p over the 4 tokens, then math.exp of it.",
                  "先求 4 个词元上 −ln p 的平均值，再对它取 math.exp。"),
)

# ---- 01.3: where 0.25 ** n underflows in bfloat16 -------------------------------------------------------------
# The notebook prints the answer for 0.5 (n = 134: 2**-134 is half of bfloat16's smallest subnormal 2**-133, a tie
# that rounds to even, i.e. to 0). 0.25 = 0.5**2, so 0.25**n = 2**(-2n): 2**-132 at n = 66 is still > 0, and
# 2**-134 at n = 67 is that same tie.
_N_13 = 67

numeric(
    "01.3",
    Text("At which sequence length n does the running product 0.25 · 0.25 · … (n factors), computed in bfloat16, "
         "first become exactly 0.0? Reason it out from the p = 0.5 row of the table, then verify.",
         "用 bfloat16 计算连乘积 0.25 · 0.25 · …（n 个因子），序列长度 n 为多少时它第一次恰好变成 0.0？"
         "先根据表中 p = 0.5 那一行推出答案，再动手验证。"),
    _N_13,
    wrong={
        134: Text("134 is the length for p = 0.5; each factor 0.25 = 0.5**2 halves the product twice.",
                  "134 是 p = 0.5 时的长度；每个因子 0.25 = 0.5**2 让乘积减半两次。"),
        66: (Text("0.25**66 = 2**-132 is still above bfloat16's smallest subnormal 2**-133, so it is not 0 yet; "
                  "one more factor gives 2**-134.",
                  "0.25**66 = 2**-132 仍大于 bfloat16 最小的次正规数 2**-133，所以还不是 0；"
                  "再乘一个因子才得到 2**-134。")),
        68: (Text("2**-134 (n = 67) is exactly half of the smallest subnormal 2**-133: a tie, and round-half-to-even "
                  "sends it to the even neighbour, 0 — not up to 2**-133.",
                  "2**-134（n = 67）恰好是最小次正规数 2**-133 的一半：这是平局，四舍六入五成双（round-half-to-even）"
                  "把它舍入到偶数邻居 0，而不是向上舍入到 2**-133。")),
        (63, 64): Text("2**-126 is bfloat16's smallest *normal* number; subnormals go further down, to 2**-133.",
                       "2**-126 是 bfloat16 最小的*正规*数；次正规数还能更小，一直到 2**-133。"),
        (75, 13, 538): (Text("that is the answer for another dtype (float32: 2**-149, float16: 2**-24, float64: 2**-1074); "
                             "bfloat16 keeps float32's exponent range but only 7 fraction bits, so its subnormals stop at "
                             "2**-133.",
                             "这是另一种 dtype 的答案（float32：2**-149，float16：2**-24，float64：2**-1074）；"
                             "bfloat16 保留了 float32 的指数范围，但只有 7 个尾数位，所以它的次正规数止于 2**-133。")),
    },
    not_whole=(Text("a sequence length is a whole number: 0.25**n = 2**(-2n) jumps two halvings per factor, so ask "
                    "which whole n first lands at or below half of 2**-133.",
                    "序列长度是整数：0.25**n = 2**(-2n)，每个因子减半两次，所以要问的是："
                    "哪个整数 n 第一次落到 2**-133 的一半或更低。")),
    fallback=Text("write 0.25**n as a power of two and compare it with bfloat16's smallest subnormal, 2**-133.",
                  "把 0.25**n 写成 2 的幂，再与 bfloat16 最小的次正规数 2**-133 比较。"),
)

# ---- 01.4: a stable log-softmax ---------------------------------------------------------------------------------
_TEST_LOGITS = (
    torch.tensor([1.0, 2.0, 3.0]),
    torch.tensor([1000.0, 999.0, 0.0]),
    torch.tensor([-1000.0, -1001.0, -1003.0]),
    torch.tensor([[500.0, 0.0, -500.0, 1.0], [1.0, 2.0, 3.0, 4.0]]),
)


def _grade_14(answer) -> Text | None:
    if not callable(answer):
        return Text("pass a function, e.g. def my_log_softmax(x): ...; check('01.4', my_log_softmax).",
                    "请传入一个函数，例如 def my_log_softmax(x): ...; check('01.4', my_log_softmax)。")
    for x in _TEST_LOGITS:
        try:
            got = answer(x.clone())
        except RuntimeError as exc:
            return (Text(f"it fails on input of shape {tuple(x.shape)} ({exc}): take the max and the sum over dim=-1 "
                         "with keepdim=True so they broadcast against each row.",
                         f"它在形状为 {tuple(x.shape)} 的输入上出错（{exc}）：在 dim=-1 上求最大值和总和时用 keepdim=True，"
                         "这样它们才能按行广播。"))
        if not isinstance(got, torch.Tensor):
            return Text("the function must return a tensor (of the same shape as its input).",
                        "函数必须返回一个张量（与输入形状相同）。")
        if got.shape != x.shape:
            return (Text(f"for input shape {tuple(x.shape)} it returned shape {tuple(got.shape)}: reduce over the last "
                         "dim with keepdim=True so the subtraction broadcasts per row.",
                         f"输入形状为 {tuple(x.shape)} 时，它返回的形状是 {tuple(got.shape)}：在最后一维上归约时用 keepdim=True，"
                         "这样减法才能按行广播。"))
        if not torch.isfinite(got).all() and torch.isfinite(torch.log_softmax(x, -1)).all():
            return (Text(f"it returns inf/nan for logits {x.tolist()}: subtract the maximum logit (per row) before "
                         "exponentiating.",
                         f"对 logits {x.tolist()} 它返回了 inf/nan：取指数之前先减去（每行的）最大 logit。"))
        if (got > 1e-6).any():
            return Text("log-probabilities are ≤ 0: did you return the softmax instead of its log?",
                        "对数概率 ≤ 0：你是不是返回了 softmax，而不是它的对数？")
        if not torch.allclose(got, torch.log_softmax(x, -1), atol=1e-5):
            return (Text(f"wrong values for logits {x.tolist()}; log_softmax(x) = x − m − ln Σ exp(x − m) with m the "
                         "per-row maximum.",
                         f"logits {x.tolist()} 的结果不对；log_softmax(x) = x − m − ln Σ exp(x − m)，m 是每行的最大值。"))
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
    text=Text("Write log_softmax(x) over the last dim that stays finite for logits like [1000, 999, 0] "
                "and works row-wise on 2-D input (no torch.log_softmax / torch.logsumexp).",
                "编写 log_softmax(x)，在最后一维上计算：对 [1000, 999, 0] 这样的 logits 也保持有限，"
                "并能对二维（2-D）输入逐行计算（不用 torch.log_softmax / torch.logsumexp）。"),
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


def _wrong_15() -> tuple[tuple[torch.Tensor, Text], ...]:
    """The common wrong gradients, each with its hint (the grader tries them in this order)."""
    ref, probs, n = _solution_15(), torch.softmax(_LOGITS_15, -1), len(_TARGET_15)
    flipped = Text("the sign is flipped: the gradient of the loss is softmax − one_hot (descent then lowers it).",
                   "符号反了：损失的梯度是 softmax − one_hot（梯度下降才会让损失变小）。")
    no_target = Text("you forgot to subtract the one-hot target: ∂loss/∂z = (softmax(z) − one_hot(y)) / N.",
                     "你忘了减去 one-hot 目标：∂loss/∂z = (softmax(z) − one_hot(y)) / N。")
    return ((ref * n, Text("that is the gradient of the *summed* loss; reduction='mean' divides by the batch size (2).",
                           "这是*求和*损失的梯度；reduction='mean' 还要除以批量大小（2）。")),
            (-ref, flipped), (-ref * n, flipped), (probs, no_target), (probs / 2, no_target))


_WRONG_15 = _wrong_15()


def _grade_15(answer) -> Text | None:
    a = torch.as_tensor(answer, dtype=torch.float64)
    ref = _solution_15()
    if a.shape != ref.shape:
        return Text(f"the gradient has the logits' shape {tuple(ref.shape)}; yours has shape {tuple(a.shape)}.",
                    f"梯度的形状与 logits 相同，是 {tuple(ref.shape)}；你的形状是 {tuple(a.shape)}。")
    if torch.allclose(a, ref, atol=1e-4):
        return None
    return next((hint for wrong, hint in _WRONG_15 if torch.allclose(a, wrong, atol=1e-4)),
                Text("use ∂/∂z of −log softmax(z)_y = softmax(z) − one_hot(y), averaged over the batch; check with "
                     "autograd: F.cross_entropy(z, y).backward().",
                     "用 −log softmax(z)_y 对 z 的导数 softmax(z) − one_hot(y)，再在批量上取平均；"
                     "用自动求导检查：F.cross_entropy(z, y).backward()。"))


register(Exercise(
    id="01.5",
    text=Text("For logits [[2, 1, 0.1], [0.5, 0.5, 3]] and targets [0, 1], give the gradient of "
                "F.cross_entropy(logits, targets) (mean reduction) with respect to the logits, as a 2×3 tensor.",
                "对 logits [[2, 1, 0.1], [0.5, 0.5, 3]] 和目标 [0, 1]，给出 F.cross_entropy(logits, targets)"
                "（mean 归约）对 logits 的梯度，写成一个 2×3 的张量。"),
    grade=_grade_15,
    solution=_solution_15,
    wrong_answers=(*(wrong for wrong, _ in _WRONG_15), torch.zeros(3), torch.zeros(2, 3)),
))

# ---- 01.6: explain why the log loss learns from confident mistakes -------------------------------------------
multiple_choice(
    "01.6",
    Text("A classifier is trained with the squared error between its softmax probabilities and the one-hot target, "
         "Σ_k (p_k − y_k)², instead of the cross-entropy. Examples it gets confidently wrong (true class p = 0.0001) "
         "barely improve from step to step, while examples with p ≈ 0.5 improve quickly. Why?",
         "一个分类器用它的 softmax 概率与 one-hot 目标之间的平方误差 Σ_k (p_k − y_k)² 来训练，而不是交叉熵。"
         "它自信地判错的样本（真实类别 p = 0.0001）每一步几乎都没有改进，而 p ≈ 0.5 的样本改进得很快。为什么？"),
    {
        "a": Text("The squared error of a confidently wrong example is small, since every p_k and y_k lies between 0 and "
                  "1, so it adds little to the loss and so gets little of the update.",
                  "自信判错的样本平方误差很小，因为每个 p_k 和 y_k 都在 0 和 1 之间，"
                  "所以它对损失贡献很少，得到的更新也很少。"),
        "b": Text("A probability of 0.0001 underflows in float32 once the loss squares it (1e-8), so most of the gradient "
                  "through the true class is rounded away to zero.",
                  "概率 0.0001 在损失把它平方（1e-8）后在 float32 中下溢，"
                  "所以经过真实类别的梯度大部分被舍入成了零。"),
        "c": Text("The learning rate is too small for them: raising it 1,000-fold would correct the confidently wrong "
                  "examples as fast as the others, at no cost to the rest.",
                  "对它们来说学习率太小了：把学习率提高 1,000 倍，就能像纠正其他样本一样快地纠正自信判错的样本，"
                  "而且不会影响其余样本。"),
        "d": Text("Through the softmax, the squared error's gradient on the true class's logit carries a factor p, so it "
                  "fades as p → 0; cross-entropy's there is p − 1 ≈ −1.",
                  "经过 softmax 后，平方误差对真实类别 logit 的梯度带有因子 p，所以随 p → 0 而消失；"
                  "交叉熵在那里的梯度是 p − 1 ≈ −1。"),
    },
    "d",
    {
        "a": Text("it is near its largest possible value (about 2 when all the probability sits on one wrong class); and "
                  "a loss's value moves no weight anyway, its gradient with respect to the logits does.",
                  "它接近自己可能的最大值（当全部概率都落在一个错误类别上时约为 2）；"
                  "而且损失的值本身不会移动任何权重，移动权重的是它对 logits 的梯度。"),
        "b": Text("float32 represents numbers down to about 1e-45; underflow comes from multiplying *many* probabilities "
                  "(section 2), not from one of 0.0001 or its square.",
                  "float32 能表示小到约 1e-45 的数；下溢来自把*许多*概率相乘（第 2 节），"
                  "而不是来自一个 0.0001 或它的平方。"),
        "c": Text("the learning rate scales every example's update alike: the ratio between a confidently wrong and an "
                  "uncertain example stays the same, and the examples already right would take steps 1,000× too large.",
                  "学习率对每个样本的更新都同样缩放：自信判错的样本与不确定样本之间的比例保持不变，"
                  "而已经判对的样本会迈出大了 1,000 倍的步子。"),
    },
)
