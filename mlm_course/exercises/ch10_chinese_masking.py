"""Exercises of notebook 10_chinese_masking: the word numbers of a line, a partly visible word, a word-number
function, filling a gap with bigram counts, and why whole-word masking lowers the accuracy."""

from __future__ import annotations

import random

from mlm_course.exercises import Exercise, Text, multiple_choice, numeric, register

# ---- 10.1: word numbers of the tokens of a line -----------------------------------------------------------------
_ANSWER_101 = [-1, 0, 0, 1, 2, 2, -1]


def _grade_101(answer) -> Text | None:
    answer = [int(a) for a in answer]
    if answer == _ANSWER_101:
        return None
    if len(answer) == 5:
        return Text("the tokenizer adds [CLS] before and [SEP] after the five characters: give 7 numbers, −1 for those two.",
                    "分词器在这五个字前面加 [CLS]、后面加 [SEP]：给出 7 个数，这两个位置是 −1。")
    if len(answer) != 7:
        return Text("give one number per token: [CLS], the five characters, [SEP] (7 numbers).",
                    "每个词元给一个数：[CLS]、五个字、[SEP]（共 7 个数）。")
    if answer == [-1, 0, 1, 2, 3, 4, -1]:
        return (Text("that numbers every character as its own word (what the character tokenizer's own word_ids() says); "
                     "whole-word masking needs jieba's words: 低头 is one word, 思 one, 故乡 one.",
                     "这是把每个字都编成一个词（字分词器自己的 word_ids() 就是这么给的）；"
                     "全词掩码需要的是 jieba 的词：低头是一个词，思是一个，故乡是一个。"))
    if answer[0] != -1 or answer[-1] != -1:
        return Text("[CLS] and [SEP] belong to no word: give them −1, so that they never join a word.",
                    "[CLS] 和 [SEP] 不属于任何词：给它们 −1，这样它们永远不会并入某个词。")
    return Text("number jieba's words 0, 1, 2 from the left and give each character its word's number.",
                "从左往右把 jieba 的词编号为 0、1、2，再给每个字标上它所在词的编号。")


register(Exercise(
    id="10.1",
    text=(Text("jieba cuts 低头思故乡 into 低头 / 思 / 故乡. The character tokenizer encodes it as [CLS] 低 头 思 故 乡 [SEP]. "
                 "Give the word number of each of the 7 tokens (−1 for the special tokens), as encode_words computes it.",
                 "jieba 把 低头思故乡 切成 低头 / 思 / 故乡。字分词器把它编码为 [CLS] 低 头 思 故 乡 [SEP]。"
                 "像 encode_words 那样，给出这 7 个词元各自的词编号（特殊词元为 −1）。")),
    grade=_grade_101,
    solution=lambda: list(_ANSWER_101),
    wrong_answers=([-1, 0, 1, 2, 3, 4, -1], [0, 0, 1, 2, 2], [0, 0, 0, 1, 2, 2, 0], [-1, 0, 0, 1, 1, 2, -1]),
))

# ---- 10.2: token-level masking leaves a three-character word partly visible ---------------------------------------
_P = 0.15
numeric(
    "10.2",
    Text("Token-level masking selects each character with probability 0.15, independently. Of the three-character words "
         "that get at least one character selected, what share is left partly visible (some character not selected)?",
         "按词元掩码时，每个字独立地以概率 0.15 被选中。在至少有一个字被选中的三字词中，"
         "有多大比例仍部分可见（有字没被选中）？"),
    (1 - (1 - _P) ** 3 - _P**3) / (1 - (1 - _P) ** 3),
    wrong={
        1 - _P**3: (Text("that is the share of *all* words not selected whole; the question asks only about words with at "
                         "least one character selected: divide by P(touched) = 1 − 0.85³.",
                         "这是*所有*词中没有被整个选中的比例；题目只问至少有一个字被选中的词："
                         "要除以 P(被触及) = 1 − 0.85³。")),
        1 - (1 - _P) ** 3 - _P**3: (Text("that is P(partly visible) over all words; condition on the word being touched: "
                                         "divide by 1 − 0.85³.",
                                         "这是所有词中部分可见的概率；要以该词被触及为条件：除以 1 − 0.85³。")),
        (1 - _P) ** 3: Text("0.85³ is the chance that no character of the word is selected, the words this question leaves out.",
                            "0.85³ 是该词没有一个字被选中的概率，也就是本题不考虑的那些词。"),
    },
    fallback=Text("partly visible = touched but not all three selected: (1 − 0.85³ − 0.15³) / (1 − 0.85³).",
                  "部分可见 = 被触及但三个字没有全被选中：(1 − 0.85³ − 0.15³) / (1 − 0.85³)。"),
    rel_tol=1e-3,
)

# ---- 10.3: write the word number of every character ---------------------------------------------------------------


def char_word_ids(words):
    return [number for number, word in enumerate(words) for _ in word]


def _grade_103(fn) -> Text | None:
    rng = random.Random(10)
    cases = [["床前", "明月光", "，"], ["白日"], ["一", "二", "三"], []]
    cases += [["字" * rng.randint(1, 4) for _ in range(rng.randint(1, 9))] for _ in range(50)]
    for words in cases:
        got = [int(x) for x in fn(list(words))]
        expected = char_word_ids(words)
        if got == expected:
            continue
        if len(got) == len(words) and words and len(got) != len(expected):
            return Text(f"return one number per *character*, not per word: {words} has {len(expected)} characters.",
                        f"每个*字*返回一个数，而不是每个词一个：{words} 有 {len(expected)} 个字。")
        if got == list(range(len(expected))):
            return Text("every character got its own number: characters of the same word must share the word's number.",
                        "每个字都得到了自己的编号：同一个词里的字必须共用这个词的编号。")
        if expected and [x - 1 for x in got] == expected:
            return Text("number the words from 0, as word_ids() does (the first word is word 0).",
                        "像 word_ids() 那样从 0 开始给词编号（第一个词是词 0）。")
        return Text(f"for words {words} the answer is {expected}, got {got}.",
                    f"对词 {words}，答案是 {expected}，你得到 {got}。")
    return None


def char_word_ids_per_word(words):
    return list(range(len(words)))


def char_word_ids_per_character(words):
    return list(range(sum(len(word) for word in words)))


def char_word_ids_from_one(words):
    return [number + 1 for number, word in enumerate(words) for _ in word]


register(Exercise(
    id="10.3",
    text=(Text("Write char_word_ids(words): for jieba's words of a line (e.g. ['床前', '明月光', '，']), the number of "
                 "the word each character belongs to ([0, 0, 1, 1, 1, 2]). It is the heart of the word-start map.",
                 "编写 char_word_ids(words)：给定 jieba 切出的一行的词（例如 ['床前', '明月光', '，']），"
                 "返回每个字所属词的编号（[0, 0, 1, 1, 1, 2]）。它是词首映射的核心。")),
    grade=_grade_103,
    solution=lambda: char_word_ids,
    wrong_answers=(char_word_ids_per_word, char_word_ids_per_character, char_word_ids_from_one),
))

# ---- 10.4: filling a gap with bigram counts ----------------------------------------------------------------------
# after 明: 月 3 times, 天 once; of the 5 月 followed by something, 2 by 光; of the 2 天, 1 by 光 (unsmoothed)
_LEFT, _RIGHT_MOON, _RIGHT_SKY = (3 / 4, 1 / 4), 2 / 5, 1 / 2
numeric(
    "10.4",
    Text("A gap 明_光 and two candidates. Counted bigrams: 明 is followed by 月 3 times and by 天 once; 月 is followed by "
         "something 5 times, by 光 twice; 天 twice, by 光 once. With these unsmoothed bigram probabilities, what is "
         "p(月 | 明 _ 光), the probability of 月 among the two candidates?",
         "一个空位 明_光 和两个候选。二元计数：明 后面跟 月 3 次、跟 天 1 次；月 后面共跟了 5 次，其中 光 2 次；"
         "天 共 2 次，其中 光 1 次。用这些未平滑的二元概率，p(月 | 明 _ 光)，即两个候选中 月 的概率，是多少？"),
    _LEFT[0] * _RIGHT_MOON / (_LEFT[0] * _RIGHT_MOON + _LEFT[1] * _RIGHT_SKY),
    wrong={
        _LEFT[0]: Text("3/4 uses only the left neighbour; the gap also sees its right neighbour: multiply by p(光 | candidate).",
                       "3/4 只用了左边的邻居；空位还能看到右边的邻居：再乘以 p(光 | 候选)。"),
        _RIGHT_MOON / (_RIGHT_MOON + _RIGHT_SKY): Text("that uses only the right neighbour; multiply by p(candidate | 明) too.",
                                                       "这只用了右边的邻居；还要乘以 p(候选 | 明)。"),
        _LEFT[0] * _RIGHT_MOON: (Text("0.3 is p(月 | 明) · p(光 | 月) before normalising: divide by the same product summed "
                                      "over both candidates.",
                                      "0.3 是归一化之前的 p(月 | 明) · p(光 | 月)：要除以两个候选的同一乘积之和。")),
    },
    fallback=Text("p(c | 明 _ 光) ∝ p(c | 明) · p(光 | c); compute it for 月 and 天 and normalise.",
                  "p(c | 明 _ 光) ∝ p(c | 明) · p(光 | c)；对 月 和 天 分别计算，再归一化。"),
    rel_tol=1e-3,
)

# ---- 10.5: explain why -----------------------------------------------------------------------------------------
multiple_choice(
    "10.5",
    (Text("A character BERT is scored on held-out poems twice: once with single characters masked, once with whole jieba "
          "words masked. Its accuracy on the masked characters falls sharply. What does that say?",
          "一个字级 BERT 在留出的诗句上被评两次分：一次掩码单个字，一次掩码整个 jieba 词。"
          "它在被掩码的字上的准确率大幅下降。这说明了什么？")),
    {
        "a": (Text("The model is broken for words: it was pretrained with character masking, so it cannot predict two "
                   "masks at once; a model trained with whole-word masking would score as well on both.",
                   "这个模型处理不了词：它用按字掩码预训练，所以无法同时预测两个掩码；"
                   "用全词掩码训练的模型在两种评法下得分会一样好。")),
        "b": (Text("jieba's words are wrong for classical poems, so the second score mostly measures segmentation errors "
                   "and says little about the model.",
                   "jieba 的词对古诗来说是错的，所以第二个分数主要衡量的是分词错误，对模型说明不了多少。")),
        "c": (Text("Most of the first score came from the rest of the word: one visible character of 明月 nearly gives "
                   "the other away. A whole word hidden must come from the context, the harder task.",
                   "第一个分数大多来自词的其余部分：明月 中一个可见的字几乎就泄露了另一个字。"
                   "整个词被隐藏时，答案只能来自上下文，这个任务更难。")),
        "d": (Text("Fewer characters are masked with whole words, so the second score rests on fewer predictions and is "
                   "only noisier; the true accuracy is the same in both.",
                   "按全词掩码时被掩码的字更少，所以第二个分数依据的预测更少，只是噪声更大；两种情况下真实准确率相同。")),
    },
    "c",
    {
        "a": (Text("a model trained on whole words would do better on them, but not as well as on single characters: the "
                   "same count baseline shows the same fall, so the task is harder, whatever the model.",
                   "用全词掩码训练的模型在整词上会做得更好，但仍不如在单个字上：同样的计数基线也出现同样的下降，"
                   "所以不管是什么模型，这个任务都更难。")),
        "b": (Text("segmentation errors exist, but the fall is as large for the words jieba gets right (明月, 故乡); "
                   "what changed is how much of the answer stays visible.",
                   "分词错误确实存在，但对 jieba 切对的词（明月、故乡）下降同样大；"
                   "变化的是答案中有多少仍然可见。")),
        "d": (Text("at 15 % per word the expected share of masked characters is still 15 %; and an interval around "
                   "each score shows a gap far larger than the noise.",
                   "按每个词 15 % 掩码时，被掩码的字的期望比例仍是 15 %；而且每个分数周围的区间显示，差距远大于噪声。")),
    },
)
