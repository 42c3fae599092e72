"""Evaluation and metrics: scoring a split, accuracy / precision / recall / F1 with
``sklearn.metrics``, the most confident mistakes, predictions on raw sentences, and the TF-IDF baseline."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from mlm_course import corpus
from mlm_course.finetune.classifier import LABEL_NAMES
from mlm_course.finetune.data import Encoded, encode, make_loader
from mlm_course.models import evaluation_mode


def classification_metrics(labels: Sequence[int], predictions: Sequence[int], num_labels: int = 2) -> dict:
    """Accuracy, and precision / recall / F1 of class 1 (positive), and the confusion matrix [true][predicted]."""
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

    y, p = [int(v) for v in labels], [int(v) for v in predictions]
    if len(y) == 0 or len(y) != len(p):
        raise ValueError(f"need as many predictions as labels (and at least one): got {len(p)} and {len(y)}")
    if not all(0 <= v < num_labels for v in y + p):
        raise ValueError(f"labels and predictions must be class numbers 0 … {num_labels - 1}: pass num_labels="
                         f"{max(y + p) + 1} if there are more classes")
    precision, recall, f1, _ = precision_recall_fscore_support(y, p, labels=[1], average="micro", zero_division=0)
    return {"accuracy": float(accuracy_score(y, p)), "f1": float(f1), "precision": float(precision),
            "recall": float(recall), "confusion": confusion_matrix(y, p, labels=range(num_labels)).tolist(),
            "examples": len(y)}


def prediction_string(predictions: Sequence[int]) -> str:
    """Test predictions as stored in run files: one character (the class number) per test sentence, in order."""
    return "".join(str(int(p)) for p in predictions)


@dataclass
class EvalResult:
    """Predictions on one split in the split's order: log-probabilities [n, classes], labels, metrics, loss."""

    log_probs: torch.Tensor
    labels: list[int]
    metrics: dict

    @property
    def probabilities(self) -> torch.Tensor:
        return self.log_probs.exp()

    @property
    def predictions(self) -> list[int]:
        return self.log_probs.argmax(-1).tolist()


@torch.no_grad()
def score(model: torch.nn.Module, data: Encoded, *, pad_token_id: int, batch_size: int = 64) -> torch.Tensor:
    """Log-probabilities [examples, classes] of every example of ``data``, in the split's order (batches of
    similar lengths, each padded to its own longest)."""
    device = next(model.parameters()).device
    out = torch.full((len(data), model.config.num_labels), float("nan"))
    with evaluation_mode(model):
        for batch in make_loader(data, pad_token_id, batch_size):
            logits = model(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float()
            out[batch["index"]] = logits.log_softmax(-1).cpu()
    return out


def evaluate(model: torch.nn.Module, data: Encoded, *, pad_token_id: int, batch_size: int = 64) -> EvalResult:
    """Score every example of ``data``: log-probabilities, metrics and the mean loss."""
    log_probs = score(model, data, pad_token_id=pad_token_id, batch_size=batch_size)
    metrics = classification_metrics(data.labels, log_probs.argmax(-1).tolist(), model.config.num_labels)
    metrics["loss"] = float(F.nll_loss(log_probs, torch.tensor(data.labels)))
    return EvalResult(log_probs, list(data.labels), metrics)


def most_confident_errors(texts: Sequence[str], labels: Sequence[int], probabilities: torch.Tensor, k: int = 5,
                       names: Sequence[str] = LABEL_NAMES) -> list[dict]:
    """The ``k`` wrong predictions the model was most sure of, most confident first."""
    probabilities = torch.as_tensor(probabilities)
    confidence, predicted = probabilities.max(-1)
    wrong = (predicted != torch.as_tensor(list(labels))).nonzero().flatten()
    order = wrong[confidence[wrong].argsort(descending=True, stable=True)][:k]
    return [{"text": texts[i], "label": names[labels[i]], "predicted": names[int(predicted[i])],
             "confidence": round(float(confidence[i]), 4)} for i in order.tolist()]


@dataclass
class Predictions:
    """``labels[i]`` (class number), ``names[i]`` and ``probabilities[i]`` (one per class) for each text."""

    labels: list[int]
    names: list[str]
    probabilities: list[list[float]]


def predict(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], *,
            batch_size: int = 64, max_length: int = 128) -> Predictions:
    """Classify raw sentences: the label and the class probabilities of each."""
    if isinstance(texts, str):
        raise TypeError("pass a list of sentences, e.g. predict(model, tokenizer, ['a fine film']), not one string")
    data = encode(tokenizer, texts, [0] * len(texts), max_length=max_length)
    probs = evaluate(model, data, pad_token_id=tokenizer.pad_token_id, batch_size=batch_size).probabilities
    labels = probs.argmax(-1).tolist()
    id2label = getattr(model.config, "id2label", None) or {}
    return Predictions(labels, [id2label.get(y, str(y)) for y in labels], [[round(float(p), 6) for p in row]
                                                                           for row in probs])


def bag_of_words_baseline(train: corpus.SentimentSplit, dev: corpus.SentimentSplit, test: corpus.SentimentSplit,
                          *, cs: Sequence[float] = (0.25, 0.5, 1, 2, 4, 8, 16, 32),
                          ngram_range: tuple[int, int] = (1, 2)) -> dict:
    """TF-IDF (words and word pairs; ``ngram_range=(1, 1)``: words only) + logistic regression; C chosen by dev
    accuracy; dev and test metrics. Splits: anything with ``texts`` and ``labels``."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not all(split.labels for split in (train, dev, test)):
        raise ValueError("the baseline needs non-empty train, dev and test splits")
    start = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=ngram_range, sublinear_tf=True, min_df=1)
    x_train = vectorizer.fit_transform(train.texts)
    out = logistic_regression_on_dev((x_train, train.labels), (vectorizer.transform(dev.texts), dev.labels),
                                     (vectorizer.transform(test.texts), test.labels), cs=cs)
    return out | {"features": x_train.shape[1], "seconds": round(time.perf_counter() - start, 4)}


def logistic_regression_on_dev(train: tuple, dev: tuple, test: tuple, *, cs: Sequence[float]) -> dict:
    """Logistic regression on (features, labels) pairs: C chosen by dev accuracy (ties: the smaller C, the
    stronger regularisation); dev and test metrics of the chosen one, and its test predictions."""
    from sklearn.linear_model import LogisticRegression

    by_c = {}  # C -> (dev metrics, classifier)
    for c in cs:
        clf = LogisticRegression(C=c, max_iter=2000).fit(*train)
        by_c[c] = (classification_metrics(dev[1], clf.predict(dev[0]).tolist()), clf)
    best_c = max(by_c, key=lambda c: (by_c[c][0]["accuracy"], -c))
    dev_metrics, clf = by_c[best_c]
    predictions = clf.predict(test[0]).tolist()
    return {"C": best_c, "dev_accuracy_by_C": {str(c): round(m["accuracy"], 4) for c, (m, _) in by_c.items()},
            "dev": dev_metrics, "test": classification_metrics(test[1], predictions), "test_predictions": predictions}
