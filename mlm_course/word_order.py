"""Word order: a task that the course's own MLM pretraining transfers to (notebook 07).

Each example is a real sentence from the **held-out** split of the pretraining corpus (text the course checkpoint
never trained on) or a corrupted copy of it: two adjacent words swapped, or a span of three words shuffled. Both
versions of every sentence sit in the same split, so each split is balanced and a bag of words — which sees exactly
the same words in both versions — is at chance by construction. Only words made of letters (and inner ' or -) move,
so punctuation never lands in an odd place: the only signal is the order of the words.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from . import corpus
from .masking import binomial_interval
from .objective import compare_pairs, pseudo_log_likelihood

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


def _sentences(split: str) -> list[str]:
    """The sentences of the pretraining corpus's ``split``, whitespace normalised, in corpus order."""
    return [" ".join(s.split()) for paragraph in corpus.pretraining_paragraphs(split)
            for s in _SENTENCE_END.split(paragraph.strip())]


@lru_cache(maxsize=1)
def heldout_sentences() -> tuple[str, ...]:
    """Distinct held-out sentences of MIN_WORDS..MAX_WORDS words with a corruptible stretch, in corpus order,
    leaving out the few that also occur in the training split (the checkpoint has seen those)."""
    seen = set(_sentences("train"))
    kept = []
    for sentence in _sentences("heldout"):
        if sentence in seen or not MIN_WORDS <= len(sentence.split()) <= MAX_WORDS:
            continue
        if _movable_starts(sentence.split(), SPAN):
            seen.add(sentence)
            kept.append(sentence)
    return tuple(kept)


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
    rng = random.Random(f"{seed}:{name}")
    texts, labels, kinds = [], [], []
    for sentence in chosen:
        corrupted, kind = corrupt(sentence, rng)
        texts += [sentence, corrupted]
        labels += [1, 0]
        kinds += ["original", kind]
    return WordOrderSplit(name, texts, labels, kinds)


def zero_shot(model, tokenizer, pairs: list[tuple[str, str]], confidence: float = 0.95) -> dict:
    """How often the pseudo-log-likelihood prefers the real sentence (ties count as misses), with a Wilson interval."""
    result = compare_pairs(model, tokenizer, pairs)
    wins = round(result["fraction_good_higher"] * len(pairs))
    low, high = binomial_interval(wins, len(pairs), confidence)
    return {"accuracy": wins / len(pairs), "low": low, "high": high, "pairs": len(pairs), "wins": wins}


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


__all__ = ["WordOrderSplit", "heldout_sentences", "corrupt", "split", "zero_shot", "pll_features", "SPLITS", "SPLIT_SENTENCES"]
