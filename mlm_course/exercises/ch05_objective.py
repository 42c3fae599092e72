"""Exercises of notebook 05_objective: reductions, the gradient of the mean, the independence approximation, the
loss from logits, and pseudo-log-likelihood."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM

from mlm_course.exercises import Exercise, Near, Text, multiple_choice, numeric, register

# ---- 05.1: which average? ---------------------------------------------------------------------------------------
# a batch of 2 sequences of 8 tokens; log p(true token) at the masked positions: row 0 → −1, −2, −3; row 1 → −6
_ANSWER_51 = 3.0

numeric(
    "05.1",
    Text("A batch of 2 sequences × 8 tokens. log p(true token) at the masked positions: row 0 → −1, −2, −3; "
         "row 1 → −6 (all other labels are −100). What loss does BertForMaskedLM(..., labels=...) report?",
         "一个批量有 2 个序列 × 8 个词元。被掩码位置上的 log p(真实词元)：第 0 行 → −1, −2, −3；"
         "第 1 行 → −6（其他标签都是 −100）。BertForMaskedLM(..., labels=...) 报告的损失是多少？"),
    _ANSWER_51,
    wrong={
        -3.0: Text("the loss is the *negative* log-likelihood: −(−1 − 2 − 3 − 6)/4.",
                   "损失是*负*对数似然：−(−1 − 2 − 3 − 6)/4。"),
        4.0: (Text("4.0 is the per-sequence mean ((2 + 6)/2). BertForMaskedLM / F.cross_entropy average over all masked "
                   "tokens of the batch at once: 12 / 4.",
                   "4.0 是按序列求的平均（(2 + 6)/2）。BertForMaskedLM / F.cross_entropy 是一次性在整个批量的"
                   "所有被掩码词元上求平均：12 / 4。")),
        12.0: Text("12 is the sum; the library's default reduction is the mean over the 4 masked positions.",
                   "12 是总和；这个库默认的归约方式是在 4 个被掩码位置上求平均。"),
        0.75: Text("divide by the number of masked positions (4), not by every position of the batch (16).",
                   "除以被掩码位置的个数（4），而不是批量中所有位置的个数（16）。"),
    },
    fallback=Text("add −log p over the masked positions of the whole batch and divide by how many there are.",
                  "把整个批量中被掩码位置上的 −log p 加起来，再除以这些位置的个数。"),
    rel_tol=1e-9, abs_tol=1e-3,  # math.isclose's default rel_tol
)

# ---- 05.2: the gradient of the mean -----------------------------------------------------------------------------
_ANSWER_52 = (0.3 - 1) / 20

numeric(
    "05.2",
    Text("A batch has N = 20 masked positions; the loss is their mean. At one of them the model gives the true "
         "token probability 0.3. What is ∂loss/∂(that position's logit of the true token)?",
         "一个批量有 N = 20 个被掩码位置；损失是它们的平均。在其中一个位置，模型给真实词元的概率是 0.3。"
         "∂loss/∂(该位置真实词元的 logit) 是多少？"),
    _ANSWER_52,
    wrong={
        Near(0.3 - 1, abs_tol=1e-4):
            Text("that is the gradient of one token's −log p; the mean divides every token's term by N = 20.",
                 "这是单个词元 −log p 的梯度；求平均会把每个词元的项都除以 N = 20。"),
        -_ANSWER_52: Text("check the sign: raising the true token's logit lowers the loss, so the derivative is negative.",
                          "检查符号：提高真实词元的 logit 会降低损失，所以导数是负的。"),
        (0.3 / 20, -0.3 / 20): Text("∂(−log softmax(z)_y)/∂z_y = p_y − 1, not p_y.",
                                    "∂(−log softmax(z)_y)/∂z_y = p_y − 1，而不是 p_y。"),
    },
    fallback=Text("∂(−log softmax(z)_y)/∂z_y = p_y − 1, and the mean over N masked tokens divides it by N.",
                  "∂(−log softmax(z)_y)/∂z_y = p_y − 1，而在 N 个被掩码词元上求平均要再除以 N。"),
    rel_tol=1e-9, abs_tol=1e-5,  # math.isclose's default rel_tol
)

# ---- 05.3: the independence approximation -----------------------------------------------------------------------
# "[MASK] [MASK] is a big city": new york 0.4, new orleans 0.2, san francisco 0.25, san diego 0.15 (nothing else).
# The first tokens are shared, so the marginals are not the city probabilities: p(new) = 0.6, p(san) = 0.4.
_CITIES_53 = {("new", "york"): 0.4, ("new", "orleans"): 0.2, ("san", "francisco"): 0.25, ("san", "diego"): 0.15}


def _factorised_off_cities() -> float:
    first, second = {}, {}
    for (a, b), p in _CITIES_53.items():
        first[a], second[b] = first.get(a, 0.0) + p, second.get(b, 0.0) + p
    return 1 - sum(first[a] * second[b] for a, b in _CITIES_53)


_ANSWER_53 = _factorised_off_cities()  # 1 − (0.6·0.4 + 0.6·0.2 + 0.4·0.25 + 0.4·0.15) = 0.48

numeric(
    "05.3",
    Text("In '[MASK] [MASK] is a big city' the truth is new york (0.4), new orleans (0.2), san francisco (0.25) "
         "or san diego (0.15). A model that predicts both [MASK]s perfectly but separately: how much probability "
         "does it put on pairs that are none of these four cities (such as 'new diego')?",
         "在 '[MASK] [MASK] is a big city' 中，真实答案是 new york (0.4)、new orleans (0.2)、san francisco (0.25) "
         "或 san diego (0.15)。一个模型能完美地、但分别地预测两个 [MASK]：它把多少概率放在"
         "不属于这四个城市的词对上（例如 'new diego'）？"),
    _ANSWER_53,
    wrong={
        Near(0.0): (Text("0 is what the true joint puts off the four cities; a model predicting each [MASK] separately "
                         "gives a pair p(first) · p(second), and pairs such as 'new diego' get some of that.",
                         "0 是真实的联合分布放在这四个城市之外的概率；分别预测每个 [MASK] 的模型给出的词对概率是 "
                         "p(first) · p(second)，像 'new diego' 这样的词对也会分到一些。")),
        1 - _ANSWER_53: Text("0.52 is the mass it puts *on* the four real cities; the question asks for the rest.",
                             "0.52 是它放*在*四个真实城市上的概率质量；题目问的是剩下的部分。"),
        1 - sum(p * p for p in _CITIES_53.values()):
            (Text("you multiplied each city's probability by itself; the factorised model multiplies the *marginals* "
                  "of the two positions: p(first = new) = 0.4 + 0.2, p(second = york) = 0.4.",
                  "你把每个城市的概率与它自己相乘了；分解后的模型相乘的是两个位置的*边缘*概率："
                  "p(first = new) = 0.4 + 0.2，p(second = york) = 0.4。")),
        0.62: (Text("0.62 was the three-city table of §2, where no two cities share a word; here 'new' and 'san' each "
                    "start two cities, so work out the marginals first.",
                    "0.62 是第 2 节那张三城市表的答案，那里没有两个城市共用一个词；这里 'new' 和 'san' 各自开头两个城市，"
                    "所以先算出边缘概率。")),
    },
    fallback=Text("marginals: p(first = new) = 0.6, p(first = san) = 0.4, p(second = york) = 0.4, …; the model gives each "
                  "real city p(first) · p(second); everything else goes to pairs that are not cities.",
                  "边缘概率：p(first = new) = 0.6，p(first = san) = 0.4，p(second = york) = 0.4，…；模型给每个真实城市 "
                  "p(first) · p(second)；其余概率都落到不是城市的词对上。"),
    rel_tol=1e-9, abs_tol=1e-4,  # math.isclose's default rel_tol
)

# ---- 05.4: the loss from logits ---------------------------------------------------------------------------------


def _cases_54():
    g = torch.Generator().manual_seed(44)
    logits = torch.randn(3, 7, 11, generator=g) * 3
    labels = torch.randint(0, 11, (3, 7), generator=g)
    labels[torch.rand(3, 7, generator=g) < 0.6] = -100
    labels[0, 1], labels[2] = 5, -100  # row 2 has no masked position at all
    return logits, labels


def _grade_54(fn) -> Text | None:
    logits, labels = _cases_54()
    expected = F.cross_entropy(logits.view(-1, 11), labels.view(-1))
    got = torch.as_tensor(fn(logits.clone(), labels.clone())).float()
    if got.numel() != 1:
        return Text(f"return one number (a 0-d tensor), got shape {tuple(got.shape)}.",
                    f"返回一个数（0 维张量），而你的形状是 {tuple(got.shape)}。")
    if torch.allclose(got, expected, atol=1e-5):
        return None
    return next((hint for wrong, hint in _WRONG_54
                 if math.isclose(float(got), float(wrong(logits, labels)), abs_tol=1e-4)),
                Text("log_softmax over the last dimension, gather the label's entry, keep labels != -100, negate, average.",
                     "在最后一维上做 log_softmax，取出标签对应的项，保留 labels != -100 的位置，取负，求平均。"))


def _solution_54():
    def masked_lm_loss(logits, labels):
        kept = labels != -100
        logp = logits.log_softmax(-1)[kept]
        return -logp.gather(-1, labels[kept][:, None]).mean()

    return masked_lm_loss


def _all_positions(logits, labels):
    return -logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None]).mean()


def _over_all_slots(logits, labels):
    kept = labels != -100
    logp = logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(logp * kept).sum() / kept.numel()


def _raw_logits(logits, labels):
    kept = labels != -100
    return -logits[kept].gather(-1, labels[kept][:, None]).mean()


def _per_sequence(logits, labels):
    kept = labels != -100
    logp = logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    rows = [-logp[r][kept[r]].mean() for r in range(len(labels)) if kept[r].any()]
    return torch.stack(rows).mean()


_WRONG_54 = (  # (a common wrong loss, its hint)
    (_all_positions, Text("positions with label −100 are in your average: keep only labels != -100.",
                          "标签为 −100 的位置被算进了你的平均：只保留 labels != -100。")),
    (_over_all_slots, Text("divide by the number of masked positions, not by batch × length.",
                           "除以被掩码位置的个数，而不是 batch × length。")),
    (_raw_logits, Text("raw logits are not log-probabilities: apply log_softmax over the vocabulary first.",
                       "原始 logits 不是对数概率：先在词表上做 log_softmax。")),
    (_per_sequence, Text("that is the per-sequence mean; average over all masked positions of the batch at once.",
                         "这是按序列求的平均；要一次性在整个批量的所有被掩码位置上求平均。")),
)

register(Exercise(
    id="05.4",
    text=(Text("Write masked_lm_loss(logits, labels) -> 0-d tensor from logits (batch, length, vocab) and labels "
                 "(batch, length; −100 = not predicted), equal to BertForMaskedLM's loss, without F.cross_entropy.",
                 "编写 masked_lm_loss(logits, labels) -> 0 维张量，输入为 logits (batch, length, vocab) 和 labels "
                 "(batch, length；−100 = 不预测)，结果等于 BertForMaskedLM 的损失，不用 F.cross_entropy。")),
    grade=_grade_54,
    solution=_solution_54,
    wrong_answers=tuple(wrong for wrong, _ in _WRONG_54),
))

# ---- 05.5: pseudo-log-likelihood ------------------------------------------------------------------------------------
_MASK_ID_55 = 4
_IDS_55 = torch.tensor([2, 11, 25, 17, 30, 9, 3])  # [CLS] … [SEP]


def _model_55() -> BertForMaskedLM:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(45)
        config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=16)
        return BertForMaskedLM(config).eval()


@torch.no_grad()
def _reference_55(model) -> float:
    from mlm_course.objective import masked_copies

    positions = torch.arange(1, len(_IDS_55) - 1)
    copies = masked_copies(_IDS_55, positions, _MASK_ID_55)
    logp = model(input_ids=copies).logits[torch.arange(len(positions)), positions].double().log_softmax(-1)
    return float(logp.gather(-1, _IDS_55[positions][:, None]).sum())


def _grade_55(fn) -> Text | None:
    model = _model_55()
    expected = _reference_55(model)
    got = float(fn(model, _IDS_55.clone(), _MASK_ID_55))
    if math.isclose(got, expected, abs_tol=1e-4):
        return None
    if got > 0:
        return Text("a log-likelihood is ≤ 0: sum log-probabilities (log_softmax), not probabilities or losses.",
                    "对数似然 ≤ 0：要把对数概率（log_softmax）加起来，而不是概率或损失。")
    return next((hint for wrong, hint in _WRONG_55
                 if math.isclose(got, wrong(model, _IDS_55.clone(), _MASK_ID_55), abs_tol=1e-4)),
                Text("for each non-special position i: mask only x_i, run the model, add log_softmax(logits[i])[x_i].",
                     "对每个非特殊位置 i：只掩码 x_i，运行模型，加上 log_softmax(logits[i])[x_i]。"))


def _solution_55():
    def pll(model, ids, mask_id):
        positions = torch.arange(1, len(ids) - 1)
        copies = ids.repeat(len(positions), 1)
        copies[torch.arange(len(positions)), positions] = mask_id
        with torch.no_grad():
            logits = model(input_ids=copies).logits[torch.arange(len(positions)), positions]
        return float(logits.log_softmax(-1).gather(-1, ids[positions][:, None]).sum())

    return pll


@torch.no_grad()
def _all_at_once(model, ids, mask_id):
    masked = ids.clone()
    masked[1:-1] = mask_id
    return float(model(input_ids=masked[None]).logits[0, 1:-1].log_softmax(-1).gather(-1, ids[1:-1, None]).sum())


@torch.no_grad()
def _with_specials(model, ids, mask_id):
    n = len(ids)
    copies = ids.repeat(n, 1)
    copies[torch.arange(n), torch.arange(n)] = mask_id
    return float(model(input_ids=copies).logits[torch.arange(n), torch.arange(n)].log_softmax(-1)
                 .gather(-1, ids[:, None]).sum())


@torch.no_grad()
def _probabilities(model, ids, mask_id):
    total = 0.0
    for i in range(1, len(ids) - 1):
        masked = ids.clone()
        masked[i] = mask_id
        total += float(model(input_ids=masked[None]).logits[0, i].softmax(-1)[ids[i]])
    return total


_WRONG_55 = (  # (a common wrong pseudo-log-likelihood ≤ 0, its hint; a positive one is caught first)
    (_all_at_once, Text("mask one token at a time (n copies, each with a single [MASK]), not all of them in one pass.",
                        "一次只掩码一个词元（n 份副本，每份只有一个 [MASK]），而不是在一次前向中把它们全部掩码。")),
    (_with_specials, Text("[CLS] and [SEP] are not part of the sentence: score only positions 1 … n−2.",
                          "[CLS] 和 [SEP] 不属于句子：只给位置 1 … n−2 打分。")),
)

register(Exercise(
    id="05.5",
    text=(Text("Write pll(model, ids, mask_id) -> float: the pseudo-log-likelihood of one encoded sentence "
                 "ids = [CLS] x_1 … x_n [SEP] (a 1-D tensor), Σ_i log p(x_i | the sentence with only x_i masked).",
                 "编写 pll(model, ids, mask_id) -> float：一个编码后句子 ids = [CLS] x_1 … x_n [SEP]（一维张量）的"
                 "伪对数似然，Σ_i log p(x_i | 只掩码 x_i 的句子)。")),
    grade=_grade_55,
    solution=_solution_55,
    wrong_answers=(*(wrong for wrong, _ in _WRONG_55), _probabilities),
))

# ---- 05.6: explain why accuracy missed the bug --------------------------------------------------------------------
multiple_choice(
    "05.6",
    Text("In §4 the model trained with labels=input_ids scores a *higher* top-1 accuracy over the held-out masked "
         "positions than the correctly trained one, yet a far worse loss there. Why?",
         "在第 4 节中，用 labels=input_ids 训练的模型在留出的被掩码位置上 top-1 准确率比正确训练的模型*更高*，"
         "但那里的损失却差得多。为什么？"),
    {
        "a": Text("It was trained on every position instead of 15 % of them, so it saw about six times as many targets "
                  "per step and simply learned more about the text than the correct model.",
                  "它在每个位置上训练，而不是只在 15 % 的位置上，所以每步看到的目标大约多六倍，"
                  "单纯是比正确的模型学到了更多关于文本的东西。"),
        "b": Text("Accuracy and loss measure the same thing, so after only a few hundred steps the difference between "
                  "them is noise that a longer run would remove.",
                  "准确率和损失衡量的是同一件事，所以只训练几百步后，两者之间的差别只是噪声，训练更久就会消失。"),
        "c": Text("It learned to copy its input: where the true token is shown unchanged, copying scores; at [MASK] it "
                  "confidently answers [MASK], never the truth, at a huge loss.",
                  "它学会了照抄输入：真实词元原样显示的地方，照抄就能得分；在 [MASK] 处它自信地回答 [MASK]，"
                  "从不给出真实答案，损失因此很大。"),
        "d": Text("Its training loss was far lower than the correct model's, and a lower training loss means better "
                  "predictions everywhere, held-out masked positions included.",
                  "它的训练损失比正确模型低得多，而训练损失更低意味着在所有地方预测都更好，包括留出的被掩码位置。"),
    },
    "c",
    {
        "a": Text("it saw more targets, but the wrong ones: most of them were copies of the input, and at [MASK] it "
                  "learned to answer [MASK] (its fill-mask answers show it), which no held-out question rewards.",
                  "它看到的目标更多，但都是错的：其中大多数是输入的副本，而在 [MASK] 处它学会了回答 [MASK]"
                  "（它的掩码填空答案就说明了这一点），没有哪个留出问题会奖励这种回答。"),
        "b": Text("top-1 only asks whether the best guess is right; the loss also charges for how little probability the "
                  "true token got. A model that puts almost all its mass on [MASK] is wrong there by a lot, so the two "
                  "can move in opposite directions.",
                  "top-1 只问最好的猜测对不对；损失还要为真实词元得到的概率有多小付出代价。"
                  "一个几乎把全部概率质量都放在 [MASK] 上的模型在那里错得很离谱，所以两者可能朝相反方向变化。"),
        "d": Text("its training loss was measured against its own corrupted labels, where copying is easy; only the loss "
                  "on correct labels at masked positions says how well it predicts hidden tokens.",
                  "它的训练损失是对照它自己那些被破坏的标签计算的，在那里照抄很容易；"
                  "只有在被掩码位置上对照正确标签的损失，才能说明它预测被隐藏词元的能力。"),
    },
)
