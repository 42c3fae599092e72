"""Exercises of notebook 02_tokens: ids, segments, the WordPiece algorithm, whole-word groups."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from mlm_course.exercises import Exercise, multiple_choice, register

# ---- 02.1: the ids of a sentence --------------------------------------------------------------------------------
# bert-base-uncased: [CLS] the cat sat . [SEP] (ids are line numbers of vocab.txt, counted from 0)
_IDS_21 = [101, 1996, 4937, 2938, 1012, 102]
_WRONG_21 = (  # (a common wrong list, its hint)
    (_IDS_21[1:-1], "those are the word ids only: tokenizer(text) adds [CLS] (101) in front and [SEP] (102) at the end."),
    ([i + 1 for i in _IDS_21], "every id is one too high: ids are line numbers counted from 0, not from 1."),
)


def _grade_21(answer) -> str | None:
    answer = [int(a) for a in answer]
    if answer == _IDS_21:
        return None
    if hint := next((hint for wrong, hint in _WRONG_21 if answer == wrong), None):
        return hint
    if len(answer) != len(_IDS_21):
        return f"expected {len(_IDS_21)} ids ([CLS], 4 tokens, [SEP]); you gave {len(answer)}."
    return "compare with tokenizer('The cat sat.')['input_ids'] — which positions differ?"


register(Exercise(
    id="02.1",
    prompt="Give the list of input ids bert-base-uncased produces for 'The cat sat.' (with its special tokens).",
    grade=_grade_21,
    solution=lambda: list(_IDS_21),
    wrong_answers=(*(wrong for wrong, _ in _WRONG_21), [101, 1996, 4937, 102]),
))

# ---- 02.2: token_type_ids of a pair -----------------------------------------------------------------------------
# [CLS] how old are you ? [SEP] i am six . [SEP]
_TYPES_22 = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
_WRONG_22 = (  # (a common wrong list of the right length, its hint)
    ([0] * 12, "all zeros is a single sentence: the second segment (sentence B) gets token_type_id 1."),
    (_TYPES_22[:-1] + [0], "the final [SEP] closes sentence B, so it belongs to segment 1."),
    ([0] * 6 + [1] * 6, "the first [SEP] closes sentence A, so it belongs to segment 0."),
)


def _grade_22(answer) -> str | None:
    answer = [int(a) for a in answer]
    if answer == _TYPES_22:
        return None
    if len(answer) != len(_TYPES_22):
        return (f"the pair has {len(_TYPES_22)} tokens ([CLS] + 6 + [SEP] + 4 + [SEP]); you gave {len(answer)} "
                "token_type_ids.")
    return next((hint for wrong, hint in _WRONG_22 if answer == wrong),
                "print tokenizer('How old are you?', 'I am six.')['token_type_ids'] and compare.")


register(Exercise(
    id="02.2",
    prompt="Give the token_type_ids of the pair ('How old are you?', 'I am six.') under bert-base-uncased.",
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


def _grade_23(answer: Callable[[str, set[str]], list[str]]) -> str | None:
    if not callable(answer):
        return "answer with a function wordpiece(word, vocab) -> list of pieces."
    for word, expected in _CASES_23.items():
        got = list(answer(word, set(_VOCAB_23)))
        if got == expected:
            continue
        shown = word if len(word) < 20 else f"'x' * {len(word)}"
        got = got if len(got) <= 8 else [*got[:3], f"... ({len(got)} pieces)"]
        if expected == ["[UNK]"] and "[UNK]" in got:
            return (f"{shown!r} gave {got}: when some part cannot be matched, BERT turns the *whole word* into one "
                    "[UNK], not just the unmatched part.")
        if len(word) > 100:
            return f"{shown} gave {got}: words longer than 100 characters become ['[UNK]'] without trying."
        if got and any(not p.startswith("##") for p in got[1:]):
            return f"{shown!r} gave {got}: every piece after the first carries the '##' prefix."
        return (f"{shown!r} gave {got}, expected {expected}: from each start, try the *longest* remaining substring "
                "first and shorten it one character at a time.")
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
    prompt="Write wordpiece(word, vocab) -> list[str]: greedy longest-match-first with '##' continuation pieces, "
           "['[UNK]'] for a word that cannot be spelled or is longer than 100 characters.",
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


def _grade_24(answer: Callable[[Sequence[str]], list[list[int]]]) -> str | None:
    if not callable(answer):
        return "answer with a function groups(tokens) -> list of lists of positions."
    for tokens, expected in _CASES_24.items():
        got = [list(g) for g in answer(list(tokens))]
        if got == expected:
            continue
        flat = [i for g in got for i in g]
        if any(tokens[i] in {"[CLS]", "[SEP]", "[PAD]"} for i in flat):
            return f"{list(tokens)} gave {got}: [CLS], [SEP] and [PAD] belong to no word and are never masked."
        if len(got) == len(flat):
            return f"{list(tokens)} gave {got}: a '##' piece continues the word before it — group them."
        return f"{list(tokens)} gave {got}, expected {expected}."
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
    prompt="Write groups(tokens) -> list[list[int]]: the token positions of each word (a '##' piece joins the word "
           "before it; [CLS]/[SEP]/[PAD] join none) — the units whole-word masking masks together.",
    grade=_grade_24,
    solution=lambda: _groups_solution,
    wrong_answers=(_groups_with_specials, _one_group_per_token, [[1], [2, 3, 4]]),
))

# ---- 02.5: explain why whole-word masking exists -----------------------------------------------------------------
multiple_choice(
    "02.5",
    "You train two WordPiece vocabularies on the same corpus, one of 1,000 pieces and one of 8,192, and pretrain "
    "the same small BERT with each, masking single tokens. On the same held-out text the 1,000-piece model "
    "predicts a clearly larger share of its masked tokens correctly. Does it understand the text better?",
    {
        "a": "Yes: same text, same model size, same masking rate, so a larger share of correct predictions on "
             "held-out text means a better model of that text.",
        "b": "No: a 1,000-piece vocabulary cannot spell most rare words, so it turns them into [UNK], and the model "
             "scores easy points by predicting [UNK] at those positions.",
        "c": "No: its words split into more pieces, so many masked pieces are nearly spelled by visible pieces of "
             "their own word, and each guess picks among 1,000 ids, not 8,192.",
        "d": "Yes: more pieces per sentence means more masked tokens at 15 %, so the 1,000-piece model got more "
             "training signal from the same text, and its higher accuracy shows it.",
    },
    "c",
    {
        "a": "the two models are not asked the same questions: count the pieces per word with each vocabulary, and "
             "ask how many masked pieces have a visible piece of the same word beside them.",
        "b": "WordPiece keeps every character of its alphabet as a piece, so a small vocabulary spells rare words "
             "with more pieces instead of [UNK]; [UNK] is only for characters it never saw.",
        "d": "more masked tokens per sentence is true, but it does not make the two accuracies comparable: what is "
             "each model asked to predict, and how much of it is spelling?",
    },
)
