"""Exercises of notebook 02_tokens: ids, segments, the WordPiece algorithm, whole-word groups."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from mlm_course.exercises import Exercise, Text, multiple_choice, register

# ---- 02.1: the ids of a sentence --------------------------------------------------------------------------------
# bert-base-uncased: [CLS] the cat sat . [SEP] (ids are line numbers of vocab.txt, counted from 0)
_IDS_21 = [101, 1996, 4937, 2938, 1012, 102]
_WRONG_21 = (  # (a common wrong list, its hint)
    (_IDS_21[1:-1], Text("those are the word ids only: tokenizer(text) adds [CLS] (101) in front and [SEP] (102) at the end.",
                         "这些只是单词的 id：tokenizer(text) 会在前面加上 [CLS]（101），在末尾加上 [SEP]（102）。")),
    ([i + 1 for i in _IDS_21], Text("every id is one too high: ids are line numbers counted from 0, not from 1.",
                                    "每个 id 都大了 1：id 是从 0 开始数的行号，不是从 1 开始。")),
)


def _grade_21(answer) -> Text | None:
    answer = [int(a) for a in answer]
    if answer == _IDS_21:
        return None
    if hint := next((hint for wrong, hint in _WRONG_21 if answer == wrong), None):
        return hint
    if len(answer) != len(_IDS_21):
        return Text(f"expected {len(_IDS_21)} ids ([CLS], 4 tokens, [SEP]); you gave {len(answer)}.",
                    f"应有 {len(_IDS_21)} 个 id（[CLS]、4 个词元、[SEP]）；你给了 {len(answer)} 个。")
    return Text("compare with tokenizer('The cat sat.')['input_ids'] — which positions differ?",
                "与 tokenizer('The cat sat.')['input_ids'] 比较——哪些位置不同？")


register(Exercise(
    id="02.1",
    text=Text("Give the list of input ids bert-base-uncased produces for 'The cat sat.' (with its special tokens).",
                "给出 bert-base-uncased 为 'The cat sat.' 生成的 input ids 列表（包括它的特殊词元）。"),
    grade=_grade_21,
    solution=lambda: list(_IDS_21),
    wrong_answers=(*(wrong for wrong, _ in _WRONG_21), [101, 1996, 4937, 102]),
))

# ---- 02.2: token_type_ids of a pair -----------------------------------------------------------------------------
# [CLS] how old are you ? [SEP] i am six . [SEP]
_TYPES_22 = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
_WRONG_22 = (  # (a common wrong list of the right length, its hint)
    ([0] * 12, Text("all zeros is a single sentence: the second segment (sentence B) gets token_type_id 1.",
                    "全是 0 表示单个句子：第二个片段（句子 B）的 token_type_id 是 1。")),
    (_TYPES_22[:-1] + [0], Text("the final [SEP] closes sentence B, so it belongs to segment 1.",
                                "最后的 [SEP] 结束句子 B，所以它属于片段 1。")),
    ([0] * 6 + [1] * 6, Text("the first [SEP] closes sentence A, so it belongs to segment 0.",
                             "第一个 [SEP] 结束句子 A，所以它属于片段 0。")),
)


def _grade_22(answer) -> Text | None:
    answer = [int(a) for a in answer]
    if answer == _TYPES_22:
        return None
    if len(answer) != len(_TYPES_22):
        return (Text(f"the pair has {len(_TYPES_22)} tokens ([CLS] + 6 + [SEP] + 4 + [SEP]); you gave {len(answer)} "
                     "token_type_ids.",
                     f"这个句子对有 {len(_TYPES_22)} 个词元（[CLS] + 6 + [SEP] + 4 + [SEP]）；你给了 {len(answer)} 个 "
                     "token_type_ids。"))
    return next((hint for wrong, hint in _WRONG_22 if answer == wrong),
                Text("print tokenizer('How old are you?', 'I am six.')['token_type_ids'] and compare.",
                     "打印 tokenizer('How old are you?', 'I am six.')['token_type_ids'] 并比较。"))


register(Exercise(
    id="02.2",
    text=Text("Give the token_type_ids of the pair ('How old are you?', 'I am six.') under bert-base-uncased.",
                "给出句子对 ('How old are you?', 'I am six.') 在 bert-base-uncased 下的 token_type_ids。"),
    grade=_grade_22,
    solution=lambda: list(_TYPES_22),
    wrong_answers=(*(wrong for wrong, _ in _WRONG_22), [0, 1]),
))

# ---- 02.3: greedy longest-match-first ---------------------------------------------------------------------------
_VOCAB_23 = {"un", "una", "##ff", "##ffa", "##able", "##ble", "##a", "##b", "##l", "##e", "a", "b", "l", "e",
             "play", "##ing", "##s", "##er", "player", "x", "##x"}
_CASES_23 = {
    "unaffable": ["una", "##ffa", "##ble"],
    "playing": ["play", "##ing"],
    "players": ["player", "##s"],
    "able": ["a", "##ble"],
    "ab": ["a", "##b"],
    "unz": ["[UNK]"],  # "un" matches, then nothing matches "z": the whole word is [UNK]
    "x" * 101: ["[UNK]"],  # longer than 100 characters
    "": [],
}


def _pieces_23(got: list[str]) -> tuple[str, str]:
    """The pieces a learner's function gave, as shown in the English and the Chinese hint (a long list cut short)."""
    if len(got) <= 8:
        return str(got), str(got)
    head = str(got[:3])[:-1]
    return f"{head}, '... ({len(got)} pieces)']", f"{head}, '…（共 {len(got)} 个子词）']"


def _grade_23(answer: Callable[[str, set[str]], list[str]]) -> Text | None:
    if not callable(answer):
        return Text("answer with a function wordpiece(word, vocab) -> list of pieces.",
                    "请用一个函数作答：wordpiece(word, vocab) -> 子词列表。")
    for word, expected in _CASES_23.items():
        got = list(answer(word, set(_VOCAB_23)))
        if got == expected:
            continue
        shown = word if len(word) < 20 else f"'x' * {len(word)}"
        en, zh = _pieces_23(got)
        got = got if len(got) <= 8 else [*got[:3], f"... ({len(got)} pieces)"]
        if expected == ["[UNK]"] and "[UNK]" in got:
            return (Text(f"{shown!r} gave {en}: when some part cannot be matched, BERT turns the *whole word* into one "
                         "[UNK], not just the unmatched part.",
                         f"{shown!r} 得到 {zh}：当某一部分无法匹配时，BERT 把*整个词*变成一个 [UNK]，"
                         "而不只是无法匹配的那部分。"))
        if len(word) > 100:
            return Text(f"{shown} gave {en}: words longer than 100 characters become ['[UNK]'] without trying.",
                        f"{shown} 得到 {zh}：超过 100 个字符的词直接变成 ['[UNK]']，不做任何尝试。")
        if got and any(not p.startswith("##") for p in got[1:]):
            return Text(f"{shown!r} gave {en}: every piece after the first carries the '##' prefix.",
                        f"{shown!r} 得到 {zh}：第一个子词之后的每个子词都带 '##' 前缀。")
        return (Text(f"{shown!r} gave {en}, expected {expected}: from each start, try the *longest* remaining substring "
                     "first and shorten it one character at a time.",
                     f"{shown!r} 得到 {zh}，应为 {expected}：从每个起点开始，先试剩余部分中*最长*的子串，"
                     "再一次缩短一个字符。"))
    return None


def _wordpiece_solution(word: str, vocab: set[str], max_chars: int = 100) -> list[str]:
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and (word[start:end] if start == 0 else "##" + word[start:end]) not in vocab:
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(word[start:end] if start == 0 else "##" + word[start:end])
        start = end
    return pieces


def _shortest_first(word: str, vocab: set[str]) -> list[str]:
    pieces, start = [], 0
    while start < len(word):
        end = start + 1
        while end <= len(word) and (word[start:end] if start == 0 else "##" + word[start:end]) not in vocab:
            end += 1
        if end > len(word):
            return ["[UNK]"]
        pieces.append(word[start:end] if start == 0 else "##" + word[start:end])
        start = end
    return pieces


def _no_prefix(word: str, vocab: set[str]) -> list[str]:
    return [p.removeprefix("##") for p in _wordpiece_solution(word, vocab)]


def _partial_unk(word: str, vocab: set[str]) -> list[str]:
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and (word[start:end] if start == 0 else "##" + word[start:end]) not in vocab:
            end -= 1
        if end == start:
            pieces.append("[UNK]")
            start += 1
            continue
        pieces.append(word[start:end] if start == 0 else "##" + word[start:end])
        start = end
    return pieces


def _no_length_limit(word: str, vocab: set[str]) -> list[str]:
    return _wordpiece_solution(word, vocab, max_chars=len(word))


register(Exercise(
    id="02.3",
    text=Text("Write wordpiece(word, vocab) -> list[str]: greedy longest-match-first with '##' continuation pieces, "
                "['[UNK]'] for a word that cannot be spelled or is longer than 100 characters.",
                "编写 wordpiece(word, vocab) -> list[str]：贪心最长匹配优先，后续子词带 '##' 前缀；"
                "无法拼出或超过 100 个字符的词返回 ['[UNK]']。"),
    grade=_grade_23,
    solution=lambda: _wordpiece_solution,
    wrong_answers=(_shortest_first, _no_prefix, _partial_unk, _no_length_limit, "una ##ffa ##ble"),
))

# ---- 02.4: whole-word groups ------------------------------------------------------------------------------------
_CASES_24: dict[tuple[str, ...], list[list[int]]] = {
    ("[CLS]", "the", "una", "##ffa", "##ble", "dog", "[SEP]"): [[1], [2, 3, 4], [5]],
    ("[CLS]", "play", "##ing", "[MASK]", "##s", ".", "[SEP]", "[PAD]"): [[1, 2], [3, 4], [5]],
    ("[CLS]", "[SEP]"): [],
}


def _grade_24(answer: Callable[[Sequence[str]], list[list[int]]]) -> Text | None:
    if not callable(answer):
        return Text("answer with a function groups(tokens) -> list of lists of positions.",
                    "请用一个函数作答：groups(tokens) -> 由位置列表组成的列表。")
    for tokens, expected in _CASES_24.items():
        got = [list(g) for g in answer(list(tokens))]
        if got == expected:
            continue
        flat = [i for g in got for i in g]
        if any(tokens[i] in {"[CLS]", "[SEP]", "[PAD]"} for i in flat):
            return Text(f"{list(tokens)} gave {got}: [CLS], [SEP] and [PAD] belong to no word and are never masked.",
                        f"{list(tokens)} 得到 {got}：[CLS]、[SEP] 和 [PAD] 不属于任何词，永远不会被掩码。")
        if len(got) == len(flat):
            return Text(f"{list(tokens)} gave {got}: a '##' piece continues the word before it — group them.",
                        f"{list(tokens)} 得到 {got}：'##' 子词接续它前面的词——把它们归为一组。")
        return Text(f"{list(tokens)} gave {got}, expected {expected}.",
                    f"{list(tokens)} 得到 {got}，应为 {expected}。")
    return None


_NO_WORD = {"[CLS]", "[SEP]", "[PAD]"}


def _groups_solution(tokens: Sequence[str], no_word: Collection[str] = _NO_WORD) -> list[list[int]]:
    groups: list[list[int]] = []
    for i, token in enumerate(tokens):
        if token in no_word:
            continue
        if token.startswith("##") and groups:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _groups_with_specials(tokens: Sequence[str]) -> list[list[int]]:
    """The slip: [CLS], [SEP] and [PAD] grouped as words like any other token."""
    return _groups_solution(tokens, no_word=())


def _one_group_per_token(tokens: Sequence[str]) -> list[list[int]]:
    return [[i] for i, t in enumerate(tokens) if t not in _NO_WORD]


register(Exercise(
    id="02.4",
    text=Text("Write groups(tokens) -> list[list[int]]: the token positions of each word (a '##' piece joins the word "
                "before it; [CLS]/[SEP]/[PAD] join none) — the units whole-word masking masks together.",
                "编写 groups(tokens) -> list[list[int]]：每个词的词元位置（'##' 子词并入它前面的词；"
                "[CLS]/[SEP]/[PAD] 不并入任何词）——也就是全词掩码一起掩码的单位。"),
    grade=_grade_24,
    solution=lambda: _groups_solution,
    wrong_answers=(_groups_with_specials, _one_group_per_token, [[1], [2, 3, 4]]),
))

# ---- 02.5: explain why whole-word masking exists -----------------------------------------------------------------
multiple_choice(
    "02.5",
    Text("You train two WordPiece vocabularies on the same corpus, one of 1,000 pieces and one of 8,192, and pretrain "
         "the same small BERT with each, masking single tokens. On the same held-out text the 1,000-piece model "
         "predicts a clearly larger share of its masked tokens correctly. Does it understand the text better?",
         "你在同一个语料上训练两个 WordPiece 词表，一个有 1,000 个子词，一个有 8,192 个，"
         "再分别用它们预训练同一个小 BERT，按单个词元掩码。在同一份留出文本上，1,000 个子词的模型"
         "预测对的被掩码词元比例明显更高。它更理解这段文本吗？"),
    {
        "a": Text("Yes: same text, same model size, same masking rate, so a larger share of correct predictions on "
                  "held-out text means a better model of that text.",
                  "是：文本相同、模型大小相同、掩码率相同，所以在留出文本上预测对的比例更高，"
                  "就意味着它对这段文本的建模更好。"),
        "b": Text("No: a 1,000-piece vocabulary cannot spell most rare words, so it turns them into [UNK], and the model "
                  "scores easy points by predicting [UNK] at those positions.",
                  "否：1,000 个子词的词表拼不出大多数罕见词，只好把它们变成 [UNK]，"
                  "模型在这些位置预测 [UNK] 就能轻松得分。"),
        "c": Text("No: its words split into more pieces, so many masked pieces are nearly spelled by visible pieces of "
                  "their own word, and each guess picks among 1,000 ids, not 8,192.",
                  "否：它的词被切成更多子词，所以许多被掩码的子词几乎已被同一个词里可见的子词拼出来了，"
                  "而且每次猜测只在 1,000 个 id 中选，而不是 8,192 个。"),
        "d": Text("Yes: more pieces per sentence means more masked tokens at 15 %, so the 1,000-piece model got more "
                  "training signal from the same text, and its higher accuracy shows it.",
                  "是：每个句子的子词更多，按 15 % 掩码的词元也更多，所以 1,000 个子词的模型从同样的文本里"
                  "得到了更多训练信号，更高的准确率正说明了这一点。"),
    },
    "c",
    {
        "a": Text("the two models are not asked the same questions: count the pieces per word with each vocabulary, and "
                  "ask how many masked pieces have a visible piece of the same word beside them.",
                  "两个模型被问的不是同样的问题：数一数每个词表下每个词有几个子词，"
                  "再问问有多少被掩码的子词旁边就有同一个词的可见子词。"),
        "b": Text("WordPiece keeps every character of its alphabet as a piece, so a small vocabulary spells rare words "
                  "with more pieces instead of [UNK]; [UNK] is only for characters it never saw.",
                  "WordPiece 把字母表中的每个字符都保留为一个子词，所以小词表会用更多子词拼出罕见词，"
                  "而不是变成 [UNK]；[UNK] 只用于它从未见过的字符。"),
        "d": Text("more masked tokens per sentence is true, but it does not make the two accuracies comparable: what is "
                  "each model asked to predict, and how much of it is spelling?",
                  "每个句子被掩码的词元更多，这没错，但这并不能让两个准确率可以相互比较："
                  "每个模型被要求预测的是什么？其中有多少只是在拼写？"),
    },
)
