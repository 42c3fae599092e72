"""Exercises of notebook 03_masking: the original count, the replacement mix, labels, fixed-count and whole-word
selection without a loop over tokens."""

from __future__ import annotations

import math

import torch

from mlm_course.exercises import Exercise, Text, multiple_choice, numeric, register

# ---- 03.1: the original BERT count ------------------------------------------------------------------------------
_LENGTHS_31 = (3, 17, 90, 150)  # none of them printed in the notebook
_COUNTS_31 = [1, 3, 14, 23]  # max(1, round_py2(0.15 * n)): 0.45, 2.55, 13.5, 22.5


def _grade_31(answer) -> Text | None:
    answer = [int(a) for a in answer]
    if answer == _COUNTS_31:
        return None
    if len(answer) != len(_LENGTHS_31):
        return Text(f"give one count per length {_LENGTHS_31}: {len(_LENGTHS_31)} numbers.",
                    f"每个长度 {_LENGTHS_31} 给一个计数：共 {len(_LENGTHS_31)} 个数。")
    if answer[0] == 0:
        return Text("the original never predicts 0 tokens: num_to_predict = min(max_pred, max(1, round(0.15 * n))).",
                    "原始实现从不预测 0 个词元：num_to_predict = min(max_pred, max(1, round(0.15 * n)))。")
    if answer[1] == 2 or answer[2] == 13:
        return Text("0.15 × 17 = 2.55 and 0.15 × 90 = 13.5: round them, do not truncate with int() (int(2.55) = 2).",
                    "0.15 × 17 = 2.55，0.15 × 90 = 13.5：要四舍五入，不要用 int() 截断（int(2.55) = 2）。")
    if answer[3] == 22:
        return (Text("0.15 × 150 = 22.5 is an exact half: the original ran on Python 2, whose round() sends halves away "
                     "from zero (23); Python 3's round() sends them to the even neighbour (22). (13.5 gives 14 either "
                     "way: 14 is even.)",
                     "0.15 × 150 = 22.5 恰好是一半：原始实现运行在 Python 2 上，它的 round() 把一半向远离零的方向舍入（23）；"
                     "Python 3 的 round() 则舍入到偶数邻居（22）。（13.5 两种方式都得 14：14 是偶数。）"))
    return Text("compute max(1, round_half_up(0.15 * n)) for each n, n counting [CLS] and [SEP].",
                "对每个 n 计算 max(1, round_half_up(0.15 * n))，n 包括 [CLS] 和 [SEP]。")


register(Exercise(
    id="03.1",
    text=(Text("How many tokens does the original BERT (15 %, no cap) predict in sequences of n = 3, 17, 90, 150 tokens "
                 "(n includes [CLS] and [SEP])? Give a list of four integers.",
                 "原始 BERT（15 %，无上限）在长度 n = 3, 17, 90, 150 个词元的序列中各预测多少个词元"
                 "（n 包括 [CLS] 和 [SEP]）？给出一个由四个整数组成的列表。")),
    grade=_grade_31,
    solution=lambda: list(_COUNTS_31),
    wrong_answers=([0, 2, 13, 22], [1, 2, 13, 22], [1, 3, 14, 22], [1, 3, 14]),
))

# ---- 03.2: the conditional probability of the second coin -------------------------------------------------------
numeric(
    "03.2",
    Text("Code draws `u1 < 0.7` → [MASK]; otherwise `u2 < q` → random, else unchanged. Which q gives the mix "
         "70 % [MASK] / 20 % random / 10 % unchanged?",
         "代码先抽 `u1 < 0.7` → [MASK]；否则 `u2 < q` → 随机词元，再否则保持不变。"
         "哪个 q 能得到 70 % [MASK] / 20 % 随机 / 10 % 不变的替换比例？"),
    2 / 3,
    wrong={
        0.2: (Text("0.2 is the overall share, but the second coin only sees the 30 % that were not [MASK]ed: "
                   "q = 0.2 / 0.3. With q = 0.2 you would get 70 / 6 / 24.",
                   "0.2 是总体比例，但第二枚硬币只看到没有被换成 [MASK] 的那 30 %："
                   "q = 0.2 / 0.3。用 q = 0.2 你会得到 70 / 6 / 24。")),
        (0.1, 1 / 3): Text("q is P(random | not [MASK]) — random is the 0.2 share out of the 0.3 left, not the 'unchanged' share.",
                           "q 是 P(随机 | 非 [MASK])——随机是剩下的 0.3 中占 0.2 的那部分，而不是“不变”的那部分。"),
    },
    fallback=Text("after the [MASK] coin 30 % remain; what fraction of those 30 % must become random to give 20 % overall?",
                  "抛完 [MASK] 那枚硬币后还剩 30 %；这 30 % 中要有多大比例变成随机词元，总体上才是 20 %？"),
    rel_tol=1e-9, abs_tol=1e-3,  # math.isclose's default rel_tol
)

# ---- 03.3: labels -----------------------------------------------------------------------------------------------
# [CLS] the cat sat on the mat . [SEP]: position 2 (cat) → [MASK], 5 (the) → the random token "dog" (3899),
# 6 (mat) selected but left unchanged. (Not the sentence of the notebook's "Mistake 4" cell, whose labels it prints.)
_ORIGINAL_33 = [101, 1996, 4937, 2938, 2006, 1996, 13523, 1012, 102]
_CORRUPTED_33 = [101, 1996, 103, 2938, 2006, 3899, 13523, 1012, 102]
_LABELS_33 = [-100, -100, 4937, -100, -100, 1996, 13523, -100, -100]


def _grade_33(answer) -> Text | None:
    answer = [int(a) for a in answer]
    if answer == _LABELS_33:
        return None
    if len(answer) != len(_ORIGINAL_33):
        return Text(f"give one label per input position ({len(_ORIGINAL_33)}).",
                    f"每个输入位置给一个标签（共 {len(_ORIGINAL_33)} 个）。")
    if 0 in answer and -100 not in answer:
        return Text("use -100, not 0, for ignored positions: 0 is the id of [PAD], a real class for the loss.",
                    "被忽略的位置用 -100，不要用 0：0 是 [PAD] 的 id，对损失来说是一个真实的类别。")
    if answer[2] == 103 or answer[5] == 3899:
        return (Text("a label is the *original* id (4937 at position 2, 1996 at position 5), not what the model is shown "
                     "([MASK] = 103, the random 3899): build the labels from the ids before corrupting them.",
                     "标签是*原始* id（位置 2 是 4937，位置 5 是 1996），而不是模型看到的内容"
                     "（[MASK] = 103，随机的 3899）：要在破坏 id 之前用它们构造标签。"))
    if answer == _ORIGINAL_33:
        return Text("unselected positions must be -100 (ignored by the loss), otherwise the model is scored on copying.",
                    "未被选中的位置必须是 -100（损失忽略它们），否则模型会因为照抄输入而得分。")
    if answer[5] == -100 or answer[6] == -100:
        return (Text("positions 5 and 6 were selected too: a random or unchanged position is predicted like a [MASK]ed "
                     "one, so it keeps its original id as the label.",
                     "位置 5 和 6 也被选中了：随机替换或保持不变的位置与换成 [MASK] 的位置一样要被预测，"
                     "所以它们的标签是各自的原始 id。"))
    return Text("labels: the original id at each selected position (2, 5 and 6), -100 everywhere else.",
                "标签：每个被选中的位置（2、5 和 6）是原始 id，其他位置都是 -100。")


register(Exercise(
    id="03.3",
    text=(Text(f"input_ids {_ORIGINAL_33} ([CLS] the cat sat on the mat . [SEP]). Positions 2, 5 and 6 are selected: "
                 f"2 becomes [MASK] (103), 5 the random token 'dog' (3899), 6 is left unchanged, so the model is shown "
                 f"{_CORRUPTED_33}. Give the labels list.",
                 f"input_ids {_ORIGINAL_33}（[CLS] the cat sat on the mat . [SEP]）。位置 2、5 和 6 被选中："
                 f"2 变成 [MASK]（103），5 变成随机词元 'dog'（3899），6 保持不变，所以模型看到的是 "
                 f"{_CORRUPTED_33}。给出标签列表。")),
    grade=_grade_33,
    solution=lambda: list(_LABELS_33),
    wrong_answers=(
        [-100, -100, 103, -100, -100, 3899, 13523, -100, -100],
        [-100, -100, 4937, -100, -100, 3899, 13523, -100, -100],
        [-100, -100, 4937, -100, -100, -100, -100, -100, -100],
        list(_ORIGINAL_33),
        [0, 0, 4937, 0, 0, 1996, 13523, 0, 0],
    ),
))

# ---- 03.4: fixed-count selection without a loop -----------------------------------------------------------------
_MASKABLE_34 = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 0], [0, 1, 0, 1, 1, 0, 1, 0], [0, 1, 1, 0, 0, 0, 0, 0]], dtype=torch.bool)
_K_34 = torch.tensor([2, 3, 1])


def _grade_34(fn) -> Text | None:
    reps = 4000
    maskable = _MASKABLE_34.repeat(reps, 1)
    k = _K_34.repeat(reps)
    got = torch.as_tensor(fn(maskable.clone(), k.clone(), torch.Generator().manual_seed(0))).bool()
    if got.shape != maskable.shape:
        return Text(f"return a bool tensor shaped like maskable {tuple(maskable.shape)}, got {tuple(got.shape)}.",
                    f"返回一个形状与 maskable 相同（{tuple(maskable.shape)}）的 bool 张量，而你的形状是 {tuple(got.shape)}。")
    if (got & ~maskable).any():
        return Text("it selected a non-maskable position ([CLS]/[SEP]/[PAD]): give those a score that always loses (-inf).",
                    "它选中了一个不可掩码的位置（[CLS]/[SEP]/[PAD]）：给这些位置一个永远落选的分数（-inf）。")
    if not torch.equal(got.sum(1), k):
        return (Text("each row must hold exactly k[i] selections; a Bernoulli draw with rate k/n only gets it right on "
                     "average. Rank random scores per row (topk / argsort) and keep the first k[i].",
                     "每一行必须恰好选中 k[i] 个位置；按比率 k/n 做伯努利抽样只是平均而言正确。"
                     "对每行的随机分数排序（topk / argsort），保留前 k[i] 个。"))
    counts = got.view(reps, 3, -1).sum(0).float()  # per layout, per position
    for row in range(3):
        c = counts[row][_MASKABLE_34[row]]
        expected = c.sum() / len(c)
        chi2 = float(((c - expected) ** 2 / expected).sum())
        if chi2 > 30:  # df ≤ 5: p < 1e-5
            return (Text("the counts are right but the choice is not uniform (e.g. always the leftmost maskable tokens): "
                         "rank *random* scores, not positions.",
                         "个数对了，但选择不均匀（例如总是最左边的可掩码词元）：要对*随机*分数排序，而不是对位置排序。"))
    again = torch.as_tensor(fn(maskable.clone(), k.clone(), torch.Generator().manual_seed(0))).bool()
    if not torch.equal(got, again):
        return Text("use the generator you are given for every random draw, so the same seed gives the same selection.",
                    "每次随机抽样都要用传给你的 generator，这样相同的随机种子才会得到相同的选择。")
    return None


def _solution_34():
    def select_fixed(maskable, k, generator):
        scores = torch.rand(maskable.shape, generator=generator).masked_fill(~maskable, -1.0)
        top = scores.topk(int(k.max()), dim=1).indices
        return torch.zeros_like(maskable).scatter(1, top, torch.arange(top.shape[1])[None, :] < k[:, None])

    return select_fixed


def _leftmost(maskable, k, generator):
    rank = torch.cumsum(maskable.long(), 1)
    return maskable & (rank <= k[:, None])


def _bernoulli_rate(maskable, k, generator):
    rate = (k / maskable.sum(1))[:, None]
    return maskable & (torch.rand(maskable.shape, generator=generator) < rate)


def _ignores_specials(maskable, k, generator):
    top = torch.rand(maskable.shape, generator=generator).topk(int(k.max()), dim=1).indices
    return torch.zeros_like(maskable).scatter(1, top, torch.arange(top.shape[1])[None, :] < k[:, None])


register(Exercise(
    id="03.4",
    text=(Text("Write select_fixed(maskable, k, generator) -> bool tensor: exactly k[i] positions of row i, uniformly "
                 "among its maskable ones, without a Python loop over tokens.",
                 "编写 select_fixed(maskable, k, generator) -> bool 张量：在第 i 行的可掩码位置中均匀地"
                 "恰好选出 k[i] 个，不用对词元的 Python 循环。")),
    grade=_grade_34,
    solution=_solution_34,
    wrong_answers=(_leftmost, _bernoulli_rate, _ignores_specials),
))

# ---- 03.5: whole-word Bernoulli -----------------------------------------------------------------------------------
# word ids per token, -1 = special: words of 1, 3, 2 and 1 pieces
_WORDS_35 = torch.tensor([[-1, 0, 1, 1, 1, 2, 2, 3, -1]])


def _grade_35(fn) -> Text | None:
    reps, mask_rate = 20_000, 0.3
    word_ids = _WORDS_35.repeat(reps, 1)
    got = torch.as_tensor(fn(word_ids.clone(), mask_rate, torch.Generator().manual_seed(0))).bool()
    if got.shape != word_ids.shape:
        return Text(f"return a bool tensor shaped like word_ids {tuple(word_ids.shape)}.",
                    f"返回一个形状与 word_ids 相同（{tuple(word_ids.shape)}）的 bool 张量。")
    if (got & (word_ids < 0)).any():
        return Text("a special token (word id -1) was selected.", "选中了一个特殊词元（word id 为 -1）。")
    for w in range(4):
        members = got[:, (word_ids[0] == w)]
        if not (members.all(1) | ~members.any(1)).all():
            return Text(f"word {w} was split: decide once per word and give the decision to all its pieces.",
                        f"词 {w} 被拆开了：每个词只做一次决定，并把这个决定交给它的所有子词。")
    share = got[:, (word_ids[0] == 1)][:, 0].float().mean().item()  # the 3-piece word
    single = got[:, (word_ids[0] == 0)][:, 0].float().mean().item()
    bound = 3.3 * math.sqrt(mask_rate * (1 - mask_rate) / reps)
    if abs(single - mask_rate) > bound:
        return Text(f"a one-piece word should be selected with probability {mask_rate}, got {single:.3f}.",
                    f"单个子词的词应以概率 {mask_rate} 被选中，实际是 {single:.3f}。")
    if abs(share - mask_rate) > bound:
        return (Text(f"the three-piece word was selected {share:.3f} of the time, not {mask_rate}: selecting a word when *any* "
                     "piece wins its coin favours long words (1 − 0.7³ ≈ 0.66). Flip one coin per word.",
                     f"三个子词的词被选中的比例是 {share:.3f}，而不是 {mask_rate}：只要*任一*子词的硬币命中就选中整个词，"
                     "会偏向长词（1 − 0.7³ ≈ 0.66）。每个词只抛一枚硬币。"))
    return None


def _solution_35():
    def whole_word(word_ids, mask_rate, generator):
        valid = word_ids >= 0
        first = valid & (word_ids != torch.nn.functional.pad(word_ids, (1, 0), value=-1)[:, :-1])
        coin = (torch.rand(word_ids.shape, generator=generator) < mask_rate) & first
        word_no = torch.cumsum(first.flatten(), 0).reshape(word_ids.shape) - 1
        return valid & coin[first][word_no.clamp(min=0)]

    return whole_word


def _per_token(word_ids, mask_rate, generator):
    return (word_ids >= 0) & (torch.rand(word_ids.shape, generator=generator) < mask_rate)


def _any_piece(word_ids, mask_rate, generator):
    coin = (word_ids >= 0) & (torch.rand(word_ids.shape, generator=generator) < mask_rate)
    same = (word_ids[:, :, None] == word_ids[:, None, :]) & (word_ids[:, None, :] >= 0)
    return (word_ids >= 0) & (same & coin[:, None, :]).any(-1)


def _first_piece_only(word_ids, mask_rate, generator):
    valid = word_ids >= 0
    first = valid & (word_ids != torch.nn.functional.pad(word_ids, (1, 0), value=-1)[:, :-1])
    return first & (torch.rand(word_ids.shape, generator=generator) < mask_rate)


register(Exercise(
    id="03.5",
    text=(Text("Write whole_word(word_ids, mask_rate, generator) -> bool tensor: each word (same id, -1 = special) "
                 "selected with probability mask_rate, all its pieces together, without a Python loop over tokens.",
                 "编写 whole_word(word_ids, mask_rate, generator) -> bool 张量：每个词（相同的 id，-1 = 特殊词元）"
                 "以概率 mask_rate 被选中，它的所有子词一起选中，不用对词元的 Python 循环。")),
    grade=_grade_35,
    solution=_solution_35,
    wrong_answers=(_per_token, _any_piece, _first_piece_only),
))

# ---- 03.6: explain why (transfer): 100 % [MASK] and frozen features --------------------------------------------
multiple_choice(
    "03.6",
    Text("A team pretrains BERT with 100 % [MASK] (no random, no unchanged tokens). They then freeze it and train only a "
         "linear tagger on its token vectors to find names in sentences, which contain no [MASK]. Compared with the same "
         "BERT pretrained with 80 / 10 / 10, what do you expect, and why?",
         "一个团队用 100 % [MASK]（没有随机词元，也没有保持不变的词元）预训练 BERT。然后冻结它，"
         "只在它的词元向量上训练一个线性标注器，用来找出句子中的人名，而这些句子里没有 [MASK]。"
         "与用 80 / 10 / 10 预训练的同一个 BERT 相比，你预期会怎样？为什么？"),
    {
        "a": Text("Somewhat worse tags: only [MASK] inputs were ever scored, so nothing made a visible token's vector "
                  "describe its own token, and the tagger reads only visible tokens.",
                  "标注稍差一些：只有 [MASK] 输入被计分过，所以没有任何东西促使可见词元的向量描述它自己这个词元，"
                  "而标注器读到的只有可见词元。"),
        "b": Text("The tagger fails completely: a model that only ever saw [MASK] in pretraining cannot read a sentence "
                  "without one, so its vectors for a plain sentence are noise.",
                  "标注器完全失效：预训练中只见过 [MASK] 的模型读不了没有 [MASK] 的句子，"
                  "所以它对普通句子给出的向量只是噪声。"),
        "c": Text("No difference: the tagger's sentences contain no [MASK], so what the model learnt at [MASK] positions "
                  "plays no part, and on plain sentences both models' vectors are alike.",
                  "没有差别：标注器的句子里没有 [MASK]，所以模型在 [MASK] 位置学到的东西不起作用，"
                  "而在普通句子上两个模型的向量差不多。"),
        "d": Text("Better tags: 100 % [MASK] is a harder task than 80 / 10 / 10, with a higher loss to push down, so it "
                  "builds stronger features, and the frozen tagger profits.",
                  "标注更好：100 % [MASK] 比 80 / 10 / 10 更难，要压低的损失更高，所以它能构建更强的特征，"
                  "冻结的标注器会因此受益。"),
    },
    "a",
    {
        "b": Text("in pretraining 85 % of the tokens were visible in every sentence: the model reads visible tokens all "
                  "the time. The question is what their vectors had to encode, and the effect is a small loss, not a "
                  "collapse.",
                  "预训练时每个句子都有 85 % 的词元可见：模型一直在读可见词元。问题在于它们的向量必须编码什么，"
                  "而影响是小幅的损失，不是崩溃。"),
        "c": Text("what the model learnt is exactly the problem: its vectors at visible tokens were shaped only as "
                  "context for [MASK] positions. Which positions did the loss ever score?",
                  "模型学到的东西恰恰是问题所在：它在可见词元上的向量只是作为 [MASK] 位置的上下文而形成的。"
                  "损失到底给哪些位置计过分？"),
        "d": Text("a larger loss does not mean better features: 100 % [MASK] removes the only reason to model a visible "
                  "token well. In Table 8 it beats 80 / 10 / 10 in no column by more than 0.1.",
                  "损失更大并不意味着特征更好：100 % [MASK] 去掉了把可见词元建模好的唯一理由。"
                  "在表 8 中，它在任何一列上都没有比 80 / 10 / 10 高出超过 0.1。"),
    },
)
