"""Exercises of notebook 10_chinese_masking: the word numbers of a line, a partly visible word, a word-number
function, filling a gap with bigram counts, and why whole-word masking lowers the accuracy."""

from __future__ import annotations

import random

from mlm_course.exercises import Exercise, multiple_choice, numeric, register

# ---- 10.1: word numbers of the tokens of a line -----------------------------------------------------------------
_ANSWER_101 = [-1, 0, 0, 1, 2, 2, -1]


def _grade_101(answer) -> str | None:
    answer = [int(a) for a in answer]
    if answer == _ANSWER_101:
        return None
    if len(answer) == 5:
        return "the tokenizer adds [CLS] before and [SEP] after the five characters: give 7 numbers, −1 for those two."
    if len(answer) != 7:
        return "give one number per token: [CLS], the five characters, [SEP] (7 numbers)."
    if answer == [-1, 0, 1, 2, 3, 4, -1]:
        return ("that numbers every character as its own word (what the character tokenizer's own word_ids() says); "
                "whole-word masking needs jieba's words: 低头 is one word, 思 one, 故乡 one.")
    if answer[0] != -1 or answer[-1] != -1:
        return "[CLS] and [SEP] belong to no word: give them −1, so that they never join a word."
    return "number jieba's words 0, 1, 2 from the left and give each character its word's number."


register(Exercise(
    id="10.1",
    prompt=("jieba cuts 低头思故乡 into 低头 / 思 / 故乡. The character tokenizer encodes it as [CLS] 低 头 思 故 乡 [SEP]. "
            "Give the word number of each of the 7 tokens (−1 for the special tokens), as encode_words computes it."),
    grade=_grade_101,
    solution=lambda: list(_ANSWER_101),
    wrong_answers=([-1, 0, 1, 2, 3, 4, -1], [0, 0, 1, 2, 2], [0, 0, 0, 1, 2, 2, 0], [-1, 0, 0, 1, 1, 2, -1]),
))

# ---- 10.2: token-level masking leaves a three-character word partly visible ---------------------------------------
_P = 0.15
numeric(
    "10.2",
    "Token-level masking selects each character with probability 0.15, independently. Of the three-character words "
    "that get at least one character selected, what share is left partly visible (some character not selected)?",
    (1 - (1 - _P) ** 3 - _P**3) / (1 - (1 - _P) ** 3),
    wrong={
        1 - _P**3: ("that is the share of *all* words not selected whole; the question asks only about words with at "
                    "least one character selected: divide by P(touched) = 1 − 0.85³."),
        1 - (1 - _P) ** 3 - _P**3: ("that is P(partly visible) over all words; condition on the word being touched: "
                                    "divide by 1 − 0.85³."),
        (1 - _P) ** 3: "0.85³ is the chance that no character of the word is selected, the words this question leaves out.",
    },
    fallback="partly visible = touched but not all three selected: (1 − 0.85³ − 0.15³) / (1 − 0.85³).",
    rel_tol=1e-3,
)

# ---- 10.3: write the word number of every character ---------------------------------------------------------------


def char_word_ids(words):
    return [number for number, word in enumerate(words) for _ in word]


def _grade_103(fn) -> str | None:
    rng = random.Random(10)
    cases = [["床前", "明月光", "，"], ["白日"], ["一", "二", "三"], []]
    cases += [["字" * rng.randint(1, 4) for _ in range(rng.randint(1, 9))] for _ in range(50)]
    for words in cases:
        got = [int(x) for x in fn(list(words))]
        expected = char_word_ids(words)
        if got == expected:
            continue
        if len(got) == len(words) and words and len(got) != len(expected):
            return f"return one number per *character*, not per word: {words} has {len(expected)} characters."
        if got == list(range(len(expected))):
            return "every character got its own number: characters of the same word must share the word's number."
        if expected and [x - 1 for x in got] == expected:
            return "number the words from 0, as word_ids() does (the first word is word 0)."
        return f"for words {words} the answer is {expected}, got {got}."
    return None


def char_word_ids_per_word(words):
    return list(range(len(words)))


def char_word_ids_per_character(words):
    return list(range(sum(len(word) for word in words)))


def char_word_ids_from_one(words):
    return [number + 1 for number, word in enumerate(words) for _ in word]


register(Exercise(
    id="10.3",
    prompt=("Write char_word_ids(words): for jieba's words of a line (e.g. ['床前', '明月光', '，']), the number of "
            "the word each character belongs to ([0, 0, 1, 1, 1, 2]). It is the heart of the word-start map."),
    grade=_grade_103,
    solution=lambda: char_word_ids,
    wrong_answers=(char_word_ids_per_word, char_word_ids_per_character, char_word_ids_from_one),
))

# ---- 10.4: filling a gap with bigram counts ----------------------------------------------------------------------
# after 明: 月 3 times, 天 once; of the 5 月 followed by something, 2 by 光; of the 2 天, 1 by 光 (unsmoothed)
_LEFT, _RIGHT_MOON, _RIGHT_SKY = (3 / 4, 1 / 4), 2 / 5, 1 / 2
numeric(
    "10.4",
    "A gap 明_光 and two candidates. Counted bigrams: 明 is followed by 月 3 times and by 天 once; 月 is followed by "
    "something 5 times, by 光 twice; 天 twice, by 光 once. With these unsmoothed bigram probabilities, what is "
    "p(月 | 明 _ 光), the probability of 月 among the two candidates?",
    _LEFT[0] * _RIGHT_MOON / (_LEFT[0] * _RIGHT_MOON + _LEFT[1] * _RIGHT_SKY),
    wrong={
        _LEFT[0]: "3/4 uses only the left neighbour; the gap also sees its right neighbour: multiply by p(光 | candidate).",
        _RIGHT_MOON / (_RIGHT_MOON + _RIGHT_SKY): "that uses only the right neighbour; multiply by p(candidate | 明) too.",
        _LEFT[0] * _RIGHT_MOON: ("0.3 is p(月 | 明) · p(光 | 月) before normalising: divide by the same product summed "
                                 "over both candidates."),
    },
    fallback="p(c | 明 _ 光) ∝ p(c | 明) · p(光 | c); compute it for 月 and 天 and normalise.",
    rel_tol=1e-3,
)

# ---- 10.5: explain why -----------------------------------------------------------------------------------------
multiple_choice(
    "10.5",
    ("A character BERT is scored on held-out poems twice: once with single characters masked, once with whole jieba "
     "words masked. Its accuracy on the masked characters falls sharply. What does that say?"),
    {
        "a": ("The model is broken for words: it was pretrained with character masking, so it cannot predict two "
              "masks at once; a model trained with whole-word masking would score as well on both."),
        "b": ("jieba's words are wrong for classical poems, so the second score mostly measures segmentation errors "
              "and says little about the model."),
        "c": ("Most of the first score came from the rest of the word: one visible character of 明月 nearly gives "
              "the other away. A whole word hidden must come from the context, the harder task."),
        "d": ("Fewer characters are masked with whole words, so the second score rests on fewer predictions and is "
              "only noisier; the true accuracy is the same in both."),
    },
    "c",
    {
        "a": ("a model trained on whole words would do better on them, but not as well as on single characters: the "
              "same count baseline shows the same fall, so the task is harder, whatever the model."),
        "b": ("segmentation errors exist, but the fall is as large for the words jieba gets right (明月, 故乡); "
              "what changed is how much of the answer stays visible."),
        "d": ("at 15 % per word the expected share of masked characters is still 15 %; and an interval around "
              "each score shows a gap far larger than the noise."),
    },
)
