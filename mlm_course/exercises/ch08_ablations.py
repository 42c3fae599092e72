"""Exercises of notebook 08_ablations: what a mix means per token, predictions per step, static masks, seeds, and
why one evaluation can favour one training mix."""

from __future__ import annotations

import math
import random
import statistics

from mlm_course.exercises import Exercise, Near, Text, multiple_choice, numeric, register


def _close(answer, expected: float, rel: float = 1e-6) -> bool:
    return math.isclose(float(answer), expected, rel_tol=rel, abs_tol=1e-12)


# ---- 08.1: how often the model sees each kind of input ------------------------------------------------------------
_RATE, _MIX = 0.15, (0.8, 0.1, 0.1)  # selection rate; [MASK], random, unchanged-but-predicted among the selected
_SHARES = tuple(_RATE * share for share in _MIX)  # of all maskable tokens


def _grade_81(answer) -> Text | None:
    values = [float(x) for x in answer]
    if len(values) != 3:
        return Text("give three shares: ([MASK], random token, unchanged-but-predicted).",
                    "给出三个比例：（[MASK]，随机词元，不变但要预测）。")
    if all(_close(v, e) for v, e in zip(values, _SHARES, strict=True)):
        return None
    if all(_close(v, e) for v, e in zip(values, _MIX, strict=True)):
        return Text("those are shares of the *selected* tokens; multiply by the 15 % that are selected.",
                    "这些是在*被选中*词元中的比例；要乘以被选中的那 15 %。")
    if _close(sum(values), 1.0):
        return Text("the three shares add up to the selection rate (0.15), not to 1: most tokens are not selected.",
                    "三个比例加起来等于选择率（0.15），而不是 1：大多数词元没有被选中。")
    return Text("share of all tokens = selection rate × share of the mix: 0.15 × (0.8, 0.1, 0.1).",
                "占全部词元的比例 = 选择率 × 替换比例中的份额：0.15 × (0.8, 0.1, 0.1)。")


register(Exercise(
    id="08.1",
    text=Text("At rate 15 % and MASK/SAME/RND = 80/10/10, what share of all maskable tokens does the model see as "
                "(a) [MASK], (b) a random token, (c) unchanged but predicted? Give a tuple of three numbers.",
                "在掩码率 15 %、MASK/SAME/RND = 80/10/10 下，模型看到的全部可掩码词元中，有多大比例是 "
                "(a) [MASK]，(b) 随机词元，(c) 不变但要预测？给出一个由三个数组成的元组。"),
    grade=_grade_81,
    solution=lambda: _SHARES,
    wrong_answers=(_MIX, (_MIX[0] / _RATE, *_MIX[1:]), (*_SHARES[:2], 1 - sum(_SHARES[:2]))),
))

# ---- 08.2: more masking, more predictions ------------------------------------------------------------------------
_ROWS, _MASKABLE = 32, 62  # batch 32 × 64 tokens, [CLS] and [SEP] never predicted
_EXTRA = round(_ROWS * _MASKABLE * (0.40 - 0.15))

numeric(
    "08.2",
    Text("Batch 32 × 64 tokens ([CLS] … [SEP]). How many more tokens per step (in expectation) does a 40 % "
         "masking rate predict than 15 %?",
         "批量为 32 × 64 个词元（[CLS] … [SEP]）。40 % 的掩码率比 15 % 每步（按期望）多预测多少个词元？"),
    _EXTRA,
    wrong={
        32 * 64 * 0.25: Text("[CLS] and [SEP] are never selected: 62 maskable tokens per row, not 64.",
                             "[CLS] 和 [SEP] 永远不会被选中：每行有 62 个可掩码词元，而不是 64 个。"),
        _ROWS * _MASKABLE * 0.40: Text("that is all the predictions at 40 %; the question asks how many *more* than at 15 %.",
                                       "这是 40 % 时的全部预测数；题目问的是比 15 % 时*多*多少。"),
        Near(0.40 / 0.15, rel_tol=1e-3): Text("a ratio is not a count: the expected extra number of predicted tokens per step.",
                                              "比值不是个数：要的是每步多预测的词元个数的期望。"),
    },
    fallback=Text("expected predictions per step = rows × maskable tokens × rate; take the difference of the two rates.",
                  "每步预测数的期望 = 行数 × 可掩码词元数 × 掩码率；取两个掩码率下的差。"),
    whole=False, rel_tol=1e-9, abs_tol=0.5,  # an expectation: within half a token; math.isclose's default rel_tol
)

# ---- 08.3: how often a static mask comes back ------------------------------------------------------------------
_EPOCHS, _COPIES = 30, 5
_REPEATS = _EPOCHS // _COPIES

numeric(
    "08.3",
    Text("Static masking with 5 masked copies of the corpus (BERT's dupe_factor), 30 epochs of training: how many "
         "times does the model see each sequence with the same mask?",
         "静态掩码，语料有 5 份掩码副本（BERT 的 dupe_factor），训练 30 轮：模型以同一个掩码看到每个序列多少次？"),
    _REPEATS,
    wrong={
        _COPIES: Text("5 is the number of different masks per sequence; how often is each one *seen* over 30 epochs?",
                      "5 是每个序列不同掩码的个数；30 轮中每一个被*看到*多少次？"),
        _EPOCHS: Text("each epoch uses one of the 5 copies in turn, so a given copy comes back every 5 epochs.",
                      "每一轮依次使用 5 份副本中的一份，所以某一份副本每 5 轮出现一次。"),
        1: Text("that is dynamic masking (a fresh mask each time); static copies are reused.",
                "这是动态掩码（每次都用新的掩码）；静态副本是重复使用的。"),
    },
    fallback=Text("epochs / copies: epoch e uses copy e mod copies.", "轮数 / 副本数：第 e 轮使用编号为 e mod 副本数 的副本。"),
)


# ---- 08.4: is a difference between two variants more than seed noise? ---------------------------------------------
def _paired(a, b) -> float:
    differences = [x - y for x, y in zip(a, b, strict=True)]
    return statistics.fmean(differences) / (statistics.stdev(differences) / math.sqrt(len(differences)))


def _cases_84() -> list[tuple[list[float], list[float]]]:
    rng = random.Random(84)
    cases = [([0.71, 0.74, 0.72], [0.69, 0.70, 0.66]), ([5.9, 6.1, 6.0, 6.2], [6.3, 6.25, 6.4, 6.5])]
    for n in (3, 5, 8):
        shared = [rng.gauss(0.7, 0.05) for _ in range(n)]  # what a seed does to both variants alike
        cases.append(([s + rng.gauss(0.02, 0.01) for s in shared], [s + rng.gauss(0.0, 0.01) for s in shared]))
    return cases


def _grade_84(fn) -> Text | None:
    for a, b in _cases_84():
        got = float(fn(list(a), list(b)))
        expected = _paired(a, b)
        if math.isclose(got, expected, rel_tol=1e-6):
            continue
        if math.isclose(got, -expected, rel_tol=1e-6):
            return Text("the sign is reversed: t = mean(a − b) / standard error, a minus b.",
                        "符号反了：t = mean(a − b) / 标准误，是 a 减 b。")
        if math.isclose(got, _welch_t(a, b), rel_tol=1e-6):
            return (Text("that is Welch's t for two independent groups. Seed k of both variants starts from the same "
                         "weights and sees the same data order: take the per-seed differences a[k] − b[k] first.",
                         "这是两个独立组的 Welch t。两个变体的第 k 个随机种子从相同的权重出发，看到相同的数据顺序："
                         "先取每个随机种子的差 a[k] − b[k]。"))
        if math.isclose(got, _population_t(a, b), rel_tol=1e-6):
            return Text("use the sample standard deviation of the differences (divide by n − 1, not n).",
                        "用差值的样本标准差（除以 n − 1，而不是 n）。")
        if math.isclose(got, _no_sqrt_t(a, b), rel_tol=1e-6):
            return Text("the standard error of a mean is s / √n: divide the differences' standard deviation by √n.",
                        "平均值的标准误是 s / √n：把差值的标准差除以 √n。")
        return Text(f"for a={a} and b={b} the expected t is {expected:.4f}; got {got:.4f}.",
                    f"对 a={a} 和 b={b}，t 应为 {expected:.4f}；你得到 {got:.4f}。")
    return None


def _solution_84():
    def paired_t(a, b):
        differences = [x - y for x, y in zip(a, b, strict=True)]
        n = len(differences)
        mean = sum(differences) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
        return mean / (sd / math.sqrt(n))

    return paired_t


def _welch_t(a, b):
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(
        statistics.variance(a) / len(a) + statistics.variance(b) / len(b))


def _population_t(a, b):
    differences = [x - y for x, y in zip(a, b, strict=True)]
    return statistics.fmean(differences) / (statistics.pstdev(differences) / math.sqrt(len(differences)))


def _reversed_t(a, b):
    return -_paired(a, b)


def _no_sqrt_t(a, b):
    differences = [x - y for x, y in zip(a, b, strict=True)]
    return statistics.fmean(differences) / statistics.stdev(differences)


register(Exercise(
    id="08.4",
    text=Text("Write paired_t(a, b) -> float: the paired t statistic of two lists of per-seed results, a[k] and b[k] "
                "from the same seed (mean of the differences a[k] − b[k] over its standard error: their sample standard "
                "deviation / √n), without scipy.",
                "编写 paired_t(a, b) -> float：两个按随机种子排列的结果列表的配对 t 统计量，a[k] 和 b[k] "
                "来自同一个随机种子（差值 a[k] − b[k] 的平均除以它的标准误：差值的样本标准差 / √n），不用 scipy。"),
    grade=_grade_84,
    solution=_solution_84,
    wrong_answers=(_welch_t, _population_t, _reversed_t, _no_sqrt_t),
))

# ---- 08.5: explain why the frozen 80/10/10 evaluation favours mixes with SAME -------------------------------------
multiple_choice(
    "08.5",
    Text("On the frozen 15 % 80/10/10 held-out masks, the mixes that keep some tokens unchanged (SAME > 0) score clearly "
         "lower losses than those that do not (6.22 for 80/10/10 against 6.56 for 100/0/0, 95 % intervals over seeds "
         "of ±0.02 nats at most). Why does this not show, by itself, that SAME gives better representations?",
         "在冻结的 15 % 80/10/10 留出掩码上，保留部分词元不变的替换比例（SAME > 0）的损失明显低于不保留的"
         "（80/10/10 为 6.22，100/0/0 为 6.56，各随机种子上的 95 % 区间最多 ±0.02 奈特）。"
         "为什么单凭这一点不能说明 SAME 带来更好的表示？"),
    {
        "a": Text("Because three seeds are too few to tell a difference of 0.34 nats from noise, however small the spread "
                  "between them looks; it takes at least ten seeds per mix.",
                  "因为三个随机种子太少，无法把 0.34 奈特的差别与噪声区分开，不管它们之间的离散看起来多小；"
                  "每种替换比例至少需要十个随机种子。"),
        "b": Text("Because every run was scored on its own held-out positions, drawn with its own seed, so the losses of "
                  "two mixes answer different questions and cannot be compared.",
                  "因为每次运行都在它自己的留出位置上计分，这些位置用它自己的随机种子抽取，"
                  "所以两种替换比例的损失回答的是不同的问题，无法比较。"),
        "c": Text("Because mixes without SAME predict fewer tokens per step, only those shown as [MASK] or a random "
                  "token, so they got less training signal and lag behind.",
                  "因为没有 SAME 的替换比例每步预测的词元更少，只预测显示为 [MASK] 或随机词元的那些，"
                  "所以它们得到的训练信号更少，落在后面。"),
        "d": Text("Because 10 % of the evaluation positions show the true token, which only models trained with SAME "
                  "learned to copy; compare the mixes at the [MASK] positions.",
                  "因为 10 % 的评估位置显示的是真实词元，而只有用 SAME 训练的模型学会了照抄它；"
                  "应在 [MASK] 位置上比较各种替换比例。"),
    },
    "d",
    {
        "a": Text("the 95 % intervals over seeds are ±0.02 nats at most and the paired t-test over the seeds gives p 0.001 "
                  "(section 6): the difference is real. The question is what it measures.",
                  "各随机种子上的 95 % 区间最多 ±0.02 奈特，而在随机种子上做的配对 t 检验给出 p 0.001（第 6 节）："
                  "差别是真实的。问题是它衡量的是什么。"),
        "b": Text("the evaluation masks are frozen (seed 1234): every run is scored on the same positions with the same "
                  "replacements (section 3).",
                  "评估掩码是冻结的（随机种子 1234）：每次运行都在相同的位置、用相同的替换计分（第 3 节）。"),
        "c": Text("every mix selects the same 15 % of the tokens and predicts all of them; the mix only decides what the "
                  "selected positions show.",
                  "每种替换比例都选中同样 15 % 的词元，并预测它们全部；替换比例只决定被选中的位置显示什么。"),
    },
)
