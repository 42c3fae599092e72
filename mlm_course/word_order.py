"""Word order: a task that the course's own MLM pretraining transfers to (notebook 07).

Each example is a real sentence from the **held-out** split of the pretraining corpus (text the course checkpoint
never trained on) or a corrupted copy of it: two adjacent words swapped, or a span of three words shuffled. Both
versions of every sentence sit in the same split, so each split is balanced and a bag of single words — which sees
exactly the same words in both versions — is at chance by construction. A bag that also counts word *pairs* is not
(a swap changes which pairs occur), and neither is a word n-gram model (:mod:`mlm_course.ngram`): those are the
baselines a masked LM must beat. Only words made of letters (and inner ' or -) move, so punctuation never lands in an
odd place: the only signal is the order of the words. :func:`review_split` builds the same task from movie-review
sentences, a domain the course checkpoint never saw.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from . import corpus
from .objective import compare_pairs, pseudo_log_likelihood
from .statistics import wilson_interval

SPLITS = ("train", "dev", "test")
SPLIT_SENTENCES = {"test": 300, "dev": 200}  # sentences per split; "train" takes the rest (each gives 2 examples)
MIN_WORDS, MAX_WORDS = 6, 30
SPAN = 3  # words shuffled by the "shuffle" corruption
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
_MOVABLE = re.compile(r"^[A-Za-z]+(?:['-][A-Za-z]+)*$")


@dataclass(frozen=True)
class WordOrderSplit:
    """One split: parallel lists; label 1 = the real sentence, 0 = a corrupted copy; ``kinds`` says which corruption."""

    split: str
    texts: list[str]
    labels: list[int]
    kinds: list[str]  # "original", "swap" or "shuffle"

    def __len__(self) -> int:
        return len(self.texts)

    def pairs(self) -> list[tuple[str, str]]:
        """(real, corrupted) for every sentence of the split, in order."""
        return [(self.texts[i], self.texts[i + 1]) for i in range(0, len(self.texts), 2)]


def corpus_sentences(split: str) -> list[str]:
    """The sentences of the pretraining corpus's ``split``, whitespace normalised, in corpus order."""
    return [" ".join(s.split()) for paragraph in corpus.pretraining_paragraphs(split)
            for s in _SENTENCE_END.split(paragraph.strip())]


@lru_cache(maxsize=1)
def heldout_sentences() -> tuple[str, ...]:
    """Distinct held-out sentences of MIN_WORDS..MAX_WORDS words with a corruptible stretch, in corpus order,
    leaving out the few that also occur in the training split (the checkpoint has seen those)."""
    return tuple(_corruptible(corpus_sentences("heldout"), seen=set(corpus_sentences("train"))))


def _corruptible(sentences: list[str], seen: set[str]) -> list[str]:
    """The distinct ``sentences`` of MIN_WORDS..MAX_WORDS words with a stretch to reorder, not in ``seen``."""
    kept = []
    for sentence in sentences:
        if sentence in seen or not MIN_WORDS <= len(sentence.split()) <= MAX_WORDS:
            continue
        if _movable_starts(sentence.split(), SPAN):
            seen.add(sentence)
            kept.append(sentence)
    return kept


def _movable_starts(words: list[str], width: int) -> list[int]:
    """Positions i where words[i : i + width] are all plain words that are not all the same (ignoring case)."""
    return [i for i in range(len(words) - width + 1)
            if all(_MOVABLE.match(w) for w in words[i : i + width])
            and len({w.lower() for w in words[i : i + width]}) > 1]


def corrupt(sentence: str, rng: random.Random) -> tuple[str, str]:
    """A corrupted copy of ``sentence`` and its kind: "swap" (two adjacent words) or "shuffle" (SPAN words)."""
    words = sentence.split()
    kind = rng.choice(("swap", "shuffle"))
    width = 2 if kind == "swap" else SPAN
    starts = _movable_starts(words, width)
    if not starts:
        raise ValueError(f"no stretch of {width} different plain words to reorder in {sentence!r}")
    i = rng.choice(starts)
    span = words[i : i + width]
    order = list(range(width))
    while [span[j].lower() for j in order] == [w.lower() for w in span]:
        rng.shuffle(order)
    words[i : i + width] = [span[j] for j in order]
    return " ".join(words), kind


def split(name: str, seed: int = 0) -> WordOrderSplit:
    """The ``name`` split ("train", "dev" or "test"): each of its sentences, then its corrupted copy.

    The same ``seed`` always gives the same sentences, corruptions and order; no sentence is in two splits.
    """
    if name not in SPLITS:
        raise ValueError(f"split={name!r}: use one of {', '.join(SPLITS)}")
    sentences = list(heldout_sentences())
    random.Random(seed).shuffle(sentences)
    n_test, n_dev = SPLIT_SENTENCES["test"], SPLIT_SENTENCES["dev"]
    chosen = {"test": sentences[:n_test], "dev": sentences[n_test : n_test + n_dev],
              "train": sentences[n_test + n_dev :]}[name]
    return _with_corruptions(name, chosen, random.Random(f"{seed}:{name}"))


def review_split(seed: int = 0) -> WordOrderSplit:
    """The same task in another domain: SPLIT_SENTENCES["test"] movie-review sentences of the sentiment **test**
    split (text that no course model trained on), each followed by its corrupted copy."""
    sentences = _corruptible([" ".join(t.split()) for t in corpus.sentiment("test").texts], seen=set())
    random.Random(seed).shuffle(sentences)
    return _with_corruptions("reviews", sentences[: SPLIT_SENTENCES["test"]], random.Random(f"{seed}:reviews"))


def _with_corruptions(name: str, sentences: list[str], rng: random.Random) -> WordOrderSplit:
    texts, labels, kinds = [], [], []
    for sentence in sentences:
        corrupted, kind = corrupt(sentence, rng)
        texts += [sentence, corrupted]
        labels += [1, 0]
        kinds += ["original", kind]
    return WordOrderSplit(name, texts, labels, kinds)


def zero_shot(model, tokenizer, pairs: list[tuple[str, str]], confidence: float = 0.95) -> dict:
    """How often the pseudo-log-likelihood prefers the real sentence (ties count as misses), with a Wilson interval;
    ``outcomes`` holds 1/0 per pair, for paired tests against another scorer on the same pairs."""
    result = compare_pairs(model, tokenizer, pairs)
    outcomes = [int(real > other) for real, other in zip(result["good"], result["bad"], strict=True)]
    return summarise_outcomes(outcomes, confidence)


def summarise_outcomes(outcomes: list[int], confidence: float = 0.95) -> dict:
    """A scorer's 1/0 per pair (1: it preferred the real sentence) as ``accuracy`` with its Wilson interval
    (``low``, ``high``), ``pairs``, ``wins`` and the ``outcomes`` themselves."""
    wins = sum(outcomes)
    low, high = wilson_interval(wins, len(outcomes), confidence)
    return {"accuracy": wins / len(outcomes), "low": low, "high": high, "pairs": len(outcomes), "wins": wins,
            "outcomes": list(outcomes)}


def pll_features(model, tokenizer, texts: list[str]) -> list[list[float]]:
    """Per sentence, from the masked LM's pseudo-log-likelihood without any fine-tuning: [mean log-probability per
    token, the lowest, the second lowest] (nats). A swap or shuffle leaves a few tokens that fit badly, so the lowest
    ones carry the signal; unlike :func:`zero_shot` there is no reference copy to compare with."""
    rows = []
    for text in texts:
        log_probs = pseudo_log_likelihood(model, tokenizer, text).log_probs.sort().values
        second = log_probs[1] if len(log_probs) > 1 else log_probs[0]
        rows.append([float(log_probs.mean()), float(log_probs[0]), float(second)])
    return rows


__all__ = ["WordOrderSplit", "corpus_sentences", "heldout_sentences", "corrupt", "split", "review_split", "zero_shot",
           "summarise_outcomes", "pll_features", "SPLITS", "SPLIT_SENTENCES"]
