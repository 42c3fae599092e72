"""Fine-tuning a BERT for sentence classification: data → length buckets → an Accelerate loop → metrics.

* :func:`load_classifier` — ``AutoModelForSequenceClassification`` from any name :func:`mlm_course.models.resolve`
  understands (``"course"``, ``"minilm"``, a folder, a hub name with ``allow_hub=True``), or ``"random:<config>"``
  for the same architecture with fresh weights (the "no pretraining" baseline).
* :func:`encode`, :func:`sentiment_data` — token ids without padding; :class:`LengthBucketSampler` +
  :func:`pad_batch` — batches of similar lengths, each padded only to its own longest sequence.
* :func:`fit` — the course's one training loop (:class:`mlm_course.training.TrainLoop`: AdamW, warm-up/decay,
  clipping, accumulation, mixed precision, several processes through ``accelerate launch``) on length-bucketed
  batches; evaluates on dev, keeps the best weights, stops early.
* :func:`evaluate`, :func:`classification_metrics`, :func:`confident_mistakes`, :func:`predict`,
  :func:`head_by_hand` — what the notebook measures; :func:`bag_of_words_baseline` — TF-IDF + logistic regression.
* :func:`run` — load, fit, evaluate on dev and test, write ``results.json``: what the CLI and the comparison call.

"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from mlm_course import corpus, models, tokenization
from mlm_course import device as devices
from mlm_course.training import TrainConfig, TrainLoop, step_generator, write_json_atomic

LABEL_NAMES = ("negative", "positive")
MIN_MAX_LENGTH = 8
PRECISIONS = devices.PRECISIONS
RANDOM_PREFIX = "random:"
BEST_DIR = "best"
RESULTS_FILE = "results.json"


# ---- models ------------------------------------------------------------------------------------------------------


def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "Some weights ... newly initialized": expected for the head, said in the docs
    return previous


def load_classifier(
    name: str | os.PathLike,
    *,
    num_labels: int = 2,
    allow_hub: bool | None = None,
    seed: int = 0,
    dropout: float | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(sequence classifier in train mode, its tokenizer) by name; the head (and a missing pooler) is seeded.

    ``name``: ``"course"``, ``"minilm"``, a ``save_pretrained`` folder, a hub name (only with ``allow_hub``), or
    ``"random:<x>"`` — randomly initialised weights, where ``x`` is a configuration of
    :data:`mlm_course.models.CONFIGS` (with the course's WordPiece tokenizer) or any of the names above (its
    architecture and tokenizer, not its weights).
    """
    from transformers.utils import logging as hf_logging

    if num_labels < 2:
        raise ValueError(f"num_labels must be at least 2 for classification, got {num_labels}")
    name = str(name)
    label_kw = {"num_labels": num_labels}
    if num_labels == len(LABEL_NAMES):
        label_kw |= {"id2label": dict(enumerate(LABEL_NAMES)), "label2id": {n: i for i, n in enumerate(LABEL_NAMES)}}
    if dropout is not None:
        label_kw |= {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    previous = _quiet_transformers()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if name.startswith(RANDOM_PREFIX):
                arch = name[len(RANDOM_PREFIX):]
                if not arch:
                    raise ValueError("write 'random:<config>', e.g. 'random:tiny' or 'random:course'")
                if arch in models.CONFIGS:
                    tokenizer = tokenization.course_tokenizer()
                    config = models.build_config(arch, tokenizer, max_length=512)
                else:
                    source = models.resolve(arch, allow_hub=allow_hub)
                    config = AutoConfig.from_pretrained(source)
                    tokenizer = AutoTokenizer.from_pretrained(source)
                for key, value in label_kw.items():
                    setattr(config, key, value)
                model = AutoModelForSequenceClassification.from_config(config)
            else:
                source = models.resolve(name, allow_hub=allow_hub)
                try:
                    tokenizer = AutoTokenizer.from_pretrained(source)
                    # fp32 whatever the folder stores (transformers 5 keeps a bf16 checkpoint in bf16): autocast
                    # gives the speed, fp32 master weights the accuracy
                    model = AutoModelForSequenceClassification.from_pretrained(source, dtype=torch.float32,
                                                                               **label_kw)
                except OSError as exc:  # the hub path without network
                    raise ConnectionError(f"could not load {source!r} ({exc}); check the network") from exc
    finally:
        hf_logging.set_verbosity(previous)
    return model.train(), tokenizer


def head_by_hand(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """BERT's classification logits written out: tanh(W_p · h_[CLS] + b_p) → (dropout) → W_c · pooled + b_c."""
    encoder = getattr(model, model.base_model_prefix)
    hidden = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    cls = hidden[:, 0]  # the [CLS] position: the only one the head looks at
    pooled = torch.tanh(encoder.pooler.dense(cls))
    return model.classifier(model.dropout(pooled))


# ---- data ----------------------------------------------------------------------------------------------------------


@dataclass
class Encoded:
    """One split as token ids without padding (truncated to ``max_length``), its labels and texts."""

    input_ids: list[list[int]]
    labels: list[int]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def lengths(self) -> list[int]:
        return [len(ids) for ids in self.input_ids]


def _check_max_length(max_length: int, tokenizer: PreTrainedTokenizerBase | None = None) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, int):
        raise TypeError(f"max_length must be an int, not {type(max_length).__name__}")
    if max_length < MIN_MAX_LENGTH:
        raise ValueError(f"max_length={max_length} leaves almost no room for words: use at least {MIN_MAX_LENGTH}")


def encode(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], labels: Sequence[int], *, max_length: int = 128
) -> Encoded:
    """Tokenise ``texts`` ([CLS] … [SEP], truncated to ``max_length``), no padding: batches pad themselves."""
    _check_max_length(max_length)
    texts, labels = list(texts), [int(y) for y in labels]
    if not texts:
        raise ValueError("no examples to encode: the split (or the subset you asked for) is empty")
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels: pass one label per text")
    if min(labels) < 0:
        raise ValueError("labels must be class numbers 0, 1, …; found a negative label")
    ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    return Encoded(input_ids=[list(x) for x in ids], labels=labels, texts=texts)


def subset(n_total: int, n: int | None, seed: int = 0) -> list[int]:
    """``n`` indices out of ``n_total`` drawn without replacement by ``seed``, in increasing order (None = all)."""
    if n is None or n >= n_total:
        return list(range(n_total))
    if n < 1:
        raise ValueError(f"asked for {n} examples: use at least 1 (or None for all)")
    chosen = torch.randperm(n_total, generator=torch.Generator().manual_seed(seed))[:n]
    return sorted(chosen.tolist())


def sentiment_data(
    tokenizer: PreTrainedTokenizerBase, split: str, *, max_length: int = 128, examples: int | None = None,
    seed: int = 0,
) -> Encoded:
    """The movie-review sentences of ``split`` encoded; ``examples`` keeps a seeded random subset."""
    data = corpus.sentiment(split)
    keep = subset(len(data), examples, seed)
    return encode(tokenizer, [data.texts[i] for i in keep], [data.labels[i] for i in keep], max_length=max_length)


class _Examples(torch.utils.data.Dataset):
    def __init__(self, data: Encoded):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.data.input_ids[i], "label": self.data.labels[i], "index": i}


def pad_batch(features: list[dict], *, pad_token_id: int, pad_to_multiple_of: int | None = None) -> dict:
    """Stack examples, padding to the longest in *this* batch (rounded up to ``pad_to_multiple_of``)."""
    if not features:
        raise ValueError("an empty batch: every batch needs at least one example")
    longest = max(len(f["input_ids"]) for f in features)
    if pad_to_multiple_of:
        longest = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
    ids = torch.full((len(features), longest), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(features), longest), dtype=torch.long)
    for row, f in enumerate(features):
        ids[row, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
        mask[row, : len(f["input_ids"])] = 1
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "labels": torch.tensor([f["label"] for f in features]),
        "index": torch.tensor([f["index"] for f in features]),
    }


class LengthBucketSampler:
    """Batches of indices with similar lengths: every example once per epoch, a seeded new order each epoch.

    Training (``shuffle=True``): a seeded permutation is cut into pools of ``bucket_batches`` batches; each pool
    is sorted by length and cut into batches; the batch order is shuffled. Evaluation (``shuffle=False``): all
    examples sorted by length, longest first. Call :meth:`set_epoch` before each epoch.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, *, seed: int = 0, shuffle: bool = True,
                 bucket_batches: int = 50):
        if batch_size < 1 or bucket_batches < 1:
            raise ValueError(f"batch_size and bucket_batches must be ≥ 1, got {batch_size} and {bucket_batches}")
        if len(lengths) == 0:
            raise ValueError("no examples to batch: the split is empty")
        self.lengths = torch.as_tensor(list(lengths))
        self.batch_size, self.seed, self.shuffle, self.bucket_batches = batch_size, seed, shuffle, bucket_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self):
        n = len(self.lengths)
        if not self.shuffle:
            order = torch.sort(self.lengths, descending=True, stable=True).indices
            yield from (order[i: i + self.batch_size].tolist() for i in range(0, n, self.batch_size))
            return
        g = step_generator(self.seed, self.epoch, stream=11)
        order = torch.randperm(n, generator=g)
        pool = self.batch_size * self.bucket_batches
        batches = []
        for begin in range(0, n, pool):
            chunk = order[begin: begin + pool]
            chunk = chunk[torch.sort(self.lengths[chunk], descending=True, stable=True).indices]
            batches += [chunk[i: i + self.batch_size].tolist() for i in range(0, len(chunk), self.batch_size)]
        for b in torch.randperm(len(batches), generator=g).tolist():
            yield batches[b]


def make_loader(data: Encoded, pad_token_id: int, batch_size: int, *, shuffle: bool, seed: int = 0,
                pad_to_multiple_of: int | None = None, pin_memory: bool = False) -> torch.utils.data.DataLoader:
    """A DataLoader over ``data`` with a :class:`LengthBucketSampler` and :func:`pad_batch`."""
    sampler = LengthBucketSampler(data.lengths, batch_size, seed=seed, shuffle=shuffle)
    collate = partial(pad_batch, pad_token_id=pad_token_id, pad_to_multiple_of=pad_to_multiple_of)
    return torch.utils.data.DataLoader(_Examples(data), batch_sampler=sampler, collate_fn=collate,
                                       pin_memory=pin_memory)


# ---- device and precision ------------------------------------------------------------------------------------------


#: Built in :mod:`mlm_course.device`; here because the notebook and older code call them from this module.
make_accelerator = devices.make_accelerator
describe_accelerator = devices.describe_accelerator


def hardware(accelerator=None) -> dict:
    """Where a run happened (for results files): :func:`mlm_course.device.machine` plus the process count."""
    info = devices.machine(accelerator.device.type if accelerator is not None else None)
    info["processes"] = accelerator.num_processes if accelerator is not None else 1
    return info


# ---- metrics -------------------------------------------------------------------------------------------------------


def classification_metrics(labels: Sequence[int], predictions: Sequence[int], num_labels: int = 2) -> dict:
    """Accuracy, and precision / recall / F1 of class 1 (positive), and the confusion matrix [true][predicted]."""
    y = torch.as_tensor(list(labels), dtype=torch.long)
    p = torch.as_tensor(list(predictions), dtype=torch.long)
    if len(y) == 0 or len(y) != len(p):
        raise ValueError(f"need as many predictions as labels (and at least one): got {len(p)} and {len(y)}")
    confusion = torch.zeros(num_labels, num_labels, dtype=torch.long)
    confusion.index_put_((y, p), torch.ones_like(y), accumulate=True)
    tp = int(confusion[1, 1])
    fp, fn = int(confusion[:, 1].sum()) - tp, int(confusion[1].sum()) - tp
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return {"accuracy": int((y == p).sum()) / len(y), "f1": f1, "precision": precision, "recall": recall,
            "confusion": confusion.tolist(), "examples": len(y)}


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


def _score(model, loader, n: int, num_labels: int, accelerator=None) -> torch.Tensor:
    """Log-probabilities of every example, in index order, from a (possibly sharded) loader."""
    device = accelerator.device if accelerator is not None else next(model.parameters()).device
    out = torch.full((n, num_labels), float("nan"))
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for batch in loader:
            index = batch.pop("index").to(device)
            batch.pop("labels")
            logits = model(**{k: v.to(device) for k, v in batch.items()}).logits.float()
            if accelerator is not None and accelerator.num_processes > 1:
                index = accelerator.pad_across_processes(index, dim=0, pad_index=-1)
                logits = accelerator.pad_across_processes(logits, dim=0)
                index, logits = accelerator.gather((index, logits))
            keep = index >= 0
            out[index[keep].cpu()] = logits[keep].log_softmax(-1).cpu()
    model.train(was_training)
    if torch.isnan(out).any():
        raise RuntimeError("some examples were not scored: the evaluation loader skipped batches")
    return out


def evaluate(model, data: Encoded, *, pad_token_id: int, batch_size: int = 64, accelerator=None) -> EvalResult:
    """Score every example of ``data`` (batches sorted by length); with ``accelerator`` the work is sharded."""
    loader = make_loader(data, pad_token_id, batch_size, shuffle=False)
    if accelerator is not None:
        loader = accelerator.prepare(loader)
    log_probs = _score(model, loader, len(data), model.config.num_labels, accelerator)
    metrics = classification_metrics(data.labels, log_probs.argmax(-1).tolist(), model.config.num_labels)
    metrics["loss"] = float(F.nll_loss(log_probs, torch.tensor(data.labels)))
    return EvalResult(log_probs, list(data.labels), metrics)


def confident_mistakes(texts: Sequence[str], labels: Sequence[int], probabilities: torch.Tensor, k: int = 5,
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


def predict(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], *,
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


# ---- the loop --------------------------------------------------------------------------------------------------------


@dataclass
class FinetuneConfig:
    """Optimisation settings of :func:`fit`. ``warmup`` < 1 is a fraction of the steps, otherwise a count."""

    epochs: int = 2
    max_steps: int | None = None  # stop after this many optimiser steps even within an epoch
    batch_size: int = 32
    grad_accum: int = 1
    lr: float = 5e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    eval_every: int | None = None  # optimiser steps between dev evaluations (None: once per epoch)
    patience: int | None = 3  # dev evaluations without improvement before stopping (None: never stop early)
    log_every: int = 10
    eval_batch_size: int = 64
    seed: int = 0
    device: str | None = None
    precision: str = "auto"
    compile: bool = False
    pad_to_multiple_of: int | None = None  # None: 8 on CUDA (tensor cores), none elsewhere; 1: never round

    def __post_init__(self):
        self.betas = tuple(self.betas)
        checks = {
            "epochs": self.epochs >= 1, "batch_size": self.batch_size >= 1, "grad_accum": self.grad_accum >= 1,
            "lr": self.lr > 0, "warmup": self.warmup >= 0, "log_every": self.log_every >= 1,
            "max_steps": self.max_steps is None or self.max_steps >= 1,
            "eval_every": self.eval_every is None or self.eval_every >= 1,
            "patience": self.patience is None or self.patience >= 1,
            "eval_batch_size": self.eval_batch_size >= 1,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid fine-tuning settings {bad}: counts and sizes must be ≥ 1, lr > 0")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}: use one of {', '.join(PRECISIONS)}")


@dataclass
class FitResult:
    """What :func:`fit` did. ``model`` (unwrapped) holds the best dev weights (the last ones without dev)."""

    model: PreTrainedModel
    steps: int
    epochs: float
    best_step: int | None
    best_dev: dict | None
    stopped_early: bool
    seconds: float
    metrics: list[dict]
    description: str
    accelerator: Any = None
    best_dir: Path | None = None


def _save_best(model, tokenizer, out_dir: Path, row: dict) -> Path:
    """Write ``out_dir/best`` atomically: a temporary folder, then two renames (never half a model there)."""
    from transformers.utils import logging as hf_logging

    final, previous = out_dir / BEST_DIR, out_dir / f".{BEST_DIR}-previous"
    temp = Path(tempfile.mkdtemp(dir=out_dir, prefix=f".{BEST_DIR}-"))
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Writing model shards" at every improvement is noise
    try:
        model.save_pretrained(temp)
        if tokenizer is not None:
            tokenizer.save_pretrained(temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    write_json_atomic(temp / "dev_metrics.json", row)
    if previous.exists():
        shutil.rmtree(previous)
    if final.exists():
        os.replace(final, previous)
    os.replace(temp, final)
    shutil.rmtree(previous, ignore_errors=True)
    return final


def _better(row: dict, best: dict, loss_tolerance: float = 1e-4) -> bool:
    """Higher dev accuracy wins; at equal accuracy a dev loss lower by more than ``loss_tolerance``."""
    if row["accuracy"] != best["accuracy"]:
        return row["accuracy"] > best["accuracy"]
    return row["loss"] < best["loss"] - loss_tolerance


def padding_multiple(config: FinetuneConfig, device_type: str) -> int | None:
    """Batch widths are rounded up to this: ``config.pad_to_multiple_of`` when set (0 or 1: no rounding), else 8
    on CUDA (tensor cores want dimensions divisible by 8) and none elsewhere."""
    if config.pad_to_multiple_of is not None:
        return config.pad_to_multiple_of if config.pad_to_multiple_of > 1 else None
    return 8 if device_type == "cuda" else None


class RunBatches:
    """Training micro-batch ``g`` of a run (counted over steps and slots, epoch after epoch): the length-bucketed
    batches of epoch ``g // per_epoch`` in the sampler's seeded order, padded by :func:`pad_batch`.

    ``min_rows=2`` pads a batch of one with a copy whose label is ignored (-100): ``torch.compile`` specialises
    on a batch dimension of 1 and would compile the step again.
    """

    def __init__(self, data: Encoded, batch_size: int, *, seed: int, pad_token_id: int,
                 pad_to_multiple_of: int | None = None, min_rows: int = 1):
        self.data, self.min_rows = data, min_rows
        self.sampler = LengthBucketSampler(data.lengths, batch_size, seed=seed, shuffle=True)
        self.per_epoch = len(self.sampler)
        self.collate = partial(pad_batch, pad_token_id=pad_token_id, pad_to_multiple_of=pad_to_multiple_of)
        self._epoch, self._batches = None, []

    def __call__(self, g: int) -> dict[str, torch.Tensor]:
        epoch, position = divmod(g, self.per_epoch)
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)
            self._epoch, self._batches = epoch, list(self.sampler)
        rows = [{"input_ids": self.data.input_ids[i], "label": self.data.labels[i], "index": i}
                for i in self._batches[position]]
        rows += [{**rows[0], "label": -100, "index": -1}] * (self.min_rows - len(rows))
        batch = self.collate(rows)
        batch.pop("index")
        return batch


def fit(
    model: PreTrainedModel,
    train: Encoded,
    dev: Encoded | None,
    config: FinetuneConfig,
    *,
    pad_token_id: int,
    tokenizer: PreTrainedTokenizerBase | None = None,
    out_dir: str | os.PathLike | None = None,
    progress: bool = True,
    verbose: bool = True,
    accelerator=None,
) -> FitResult:
    """Fine-tune ``model`` on ``train`` with :class:`mlm_course.training.TrainLoop`; evaluate on ``dev``, keep the
    best weights, stop after ``patience`` evaluations without gain.

    With ``out_dir`` the main process writes ``metrics.jsonl`` and the best model (``best/``, save_pretrained,
    with ``tokenizer``) atomically. Runs as is under ``accelerate launch`` (each process trains on its own
    micro-batches; dev is scored in shards and gathered, so every process takes the same decisions).
    """
    if len(train) < 1:
        raise ValueError("the training split is empty: pass at least one example")
    if config.patience is not None and dev is None:
        raise ValueError("early stopping needs a dev split: pass dev=... or set patience=None")
    accelerator = accelerator or make_accelerator(config.device, config.precision)
    main = accelerator.is_main_process
    out = Path(out_dir) if out_dir is not None else None
    slots = config.grad_accum * accelerator.num_processes
    multiple = padding_multiple(config, accelerator.device.type)
    batches = RunBatches(train, config.batch_size, seed=config.seed, pad_token_id=pad_token_id,
                         pad_to_multiple_of=multiple, min_rows=2 if config.compile else 1)
    per_epoch = math.ceil(batches.per_epoch / slots)
    total = math.ceil(batches.per_epoch * config.epochs / slots)
    total = total if config.max_steps is None else min(total, config.max_steps)
    if model.config.num_labels > 1 and model.config.problem_type is None:
        model.config.problem_type = "single_label_classification"  # else set at the first forward: a recompile
    loop_config = TrainConfig(
        steps=total, batch_size=config.batch_size, grad_accum=config.grad_accum, lr=config.lr, warmup=config.warmup,
        weight_decay=config.weight_decay, betas=config.betas, eps=config.eps, grad_clip=config.grad_clip,
        eval_every=config.eval_every or per_epoch, save_every=10**9, log_every=config.log_every, seed=config.seed,
        device=config.device, precision=config.precision, compile=config.compile)
    dev_loader = None
    if dev is not None:
        dev_loader = accelerator.prepare(make_loader(
            dev, pad_token_id, config.eval_batch_size, shuffle=False, pad_to_multiple_of=multiple,
            pin_memory=accelerator.device.type == "cuda"))
    best: dict[str, Any] = {"row": None, "state": None, "dir": None, "since": 0}

    def evaluate_dev(m) -> dict:
        log_probs = _score(m, dev_loader, len(dev), m.config.num_labels, accelerator)
        metrics = classification_metrics(dev.labels, log_probs.argmax(-1).tolist(), log_probs.shape[1])
        return {"loss": float(F.nll_loss(log_probs, torch.tensor(dev.labels))), **metrics}

    def keep_best(row: dict) -> bool:
        """Keep the best dev row and weights; True when patience is exhausted."""
        if best["row"] is None or _better(row, best["row"]):
            best.update(row=row, since=0)
            best["state"] = {k: v.detach().to("cpu", copy=True) for k, v in loop.model.state_dict().items()}
            if out is not None and main:
                best["dir"] = _save_best(loop.model, tokenizer, out, row)
        else:
            best["since"] += 1
        return config.patience is not None and best["since"] >= config.patience

    loop = TrainLoop(
        model, loop_config, batch_for_step=lambda step, slot: batches(step * slots + slot),
        compute_loss=lambda m, batch: (m(**batch).loss, {}),
        evaluate=evaluate_dev if dev is not None else None, after_evaluation=keep_best,
        out_dir=out, checkpoints=False, eval_split="dev", progress=progress, accelerator=accelerator,
        annotate=lambda step: {"epoch": round(step * slots / batches.per_epoch, 3)})
    if verbose:
        accelerator.print(loop.description, flush=True)
    done = loop.train()
    model = loop.model
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    model.eval()
    row = best["row"]
    return FitResult(model, done.steps_done, round(done.steps_done * slots / batches.per_epoch, 3),
                     row["step"] if row else None, row, done.stopped_early, done.seconds, done.metrics,
                     loop.description, accelerator, best["dir"])


# ---- baseline ----------------------------------------------------------------------------------------------------------


def bag_of_words_baseline(train: corpus.SentimentSplit, dev: corpus.SentimentSplit, test: corpus.SentimentSplit,
                          *, cs: Sequence[float] = (0.25, 0.5, 1, 2, 4, 8, 16, 32),
                          ngram_range: tuple[int, int] = (1, 2)) -> dict:
    """TF-IDF (words and word pairs; ``ngram_range=(1, 1)``: words only) + logistic regression; C chosen by dev
    accuracy; dev and test metrics. Splits: anything with ``texts`` and ``labels``."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    if not all(split.labels for split in (train, dev, test)):
        raise ValueError("the baseline needs non-empty train, dev and test splits")
    start = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=ngram_range, sublinear_tf=True, min_df=1)
    x_train = vectorizer.fit_transform(train.texts)
    x_dev, x_test = vectorizer.transform(dev.texts), vectorizer.transform(test.texts)
    by_c = {}
    for c in cs:
        clf = LogisticRegression(C=c, max_iter=2000).fit(x_train, train.labels)
        by_c[c] = (classification_metrics(dev.labels, clf.predict(x_dev).tolist())["accuracy"], clf)
    best_c = max(by_c, key=lambda c: (by_c[c][0], -c))
    clf = by_c[best_c][1]
    return {"C": best_c, "dev_accuracy_by_C": {str(c): round(a, 4) for c, (a, _) in by_c.items()},
            "dev": classification_metrics(dev.labels, clf.predict(x_dev).tolist()),
            "test": classification_metrics(test.labels, clf.predict(x_test).tolist()),
            "features": x_train.shape[1], "seconds": round(time.perf_counter() - start, 4)}


# ---- one complete run ----------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """A complete fine-tuning run: the fitted model, its tokenizer, dev/test evaluations and a JSON summary."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    fit: FitResult
    dev: EvalResult
    test: EvalResult
    summary: dict


def run(
    name: str,
    config: FinetuneConfig,
    *,
    max_length: int = 128,
    train_examples: int | None = None,
    eval_examples: int | None = None,
    out_dir: str | os.PathLike | None = None,
    allow_hub: bool | None = None,
    dropout: float | None = None,
    progress: bool = True,
    verbose: bool = True,
) -> RunResult:
    """Load ``name``, fine-tune on the sentiment train split, pick by dev, score dev and test.

    With ``out_dir``: the best model and tokenizer (save_pretrained) at the top of ``out_dir``, ``best/``,
    ``metrics.jsonl`` and ``results.json`` (dev/test accuracy and F1, hardware, time).
    """
    _check_max_length(max_length)
    model, tokenizer = load_classifier(name, allow_hub=allow_hub, seed=config.seed, dropout=dropout)
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and max_length > limit:
        raise ValueError(f"{name!r} has only {limit} positions: use max_length ≤ {limit}")
    train = sentiment_data(tokenizer, "train", max_length=max_length, examples=train_examples, seed=config.seed)
    dev = sentiment_data(tokenizer, "dev", max_length=max_length, examples=eval_examples, seed=config.seed)
    test = sentiment_data(tokenizer, "test", max_length=max_length, examples=eval_examples, seed=config.seed)
    parameters = sum(p.numel() for p in model.parameters())
    accelerator = make_accelerator(config.device, config.precision)
    if verbose:
        accelerator.print(f"{name}: {parameters:,} parameters; {len(train):,} training, {len(dev):,} dev and "
                          f"{len(test):,} test sentences", flush=True)
    wall = time.perf_counter()
    result = fit(model, train, dev, config, pad_token_id=tokenizer.pad_token_id, tokenizer=tokenizer,
                 out_dir=out_dir, progress=progress, verbose=verbose, accelerator=accelerator)
    model = result.model
    pad = tokenizer.pad_token_id
    dev_eval = evaluate(model, dev, pad_token_id=pad, batch_size=config.eval_batch_size, accelerator=accelerator)
    test_eval = evaluate(model, test, pad_token_id=pad, batch_size=config.eval_batch_size, accelerator=accelerator)
    summary = {
        "model": name, "parameters": parameters, "max_length": max_length,
        "train_examples": len(train), "dev_examples": len(dev), "test_examples": len(test),
        "steps": result.steps, "epochs": result.epochs, "best_step": result.best_step,
        "stopped_early": result.stopped_early,
        "dev": _short(dev_eval.metrics), "test": _short(test_eval.metrics),
        "train_seconds": round(result.seconds, 1), "total_seconds": round(time.perf_counter() - wall, 1),
        "precision": result.description, "hardware": hardware(accelerator),
        "config": asdict(config) | {"betas": list(config.betas)},
        "date": time.strftime("%Y-%m-%d"),
    }
    if out_dir is not None and accelerator.is_main_process:
        out = Path(out_dir)
        if result.best_dir is not None:  # the best model, next to the run's logs
            shutil.copytree(result.best_dir, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("dev_*"))
        else:
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)
        write_json_atomic(out / RESULTS_FILE, summary)
    if verbose:
        accelerator.print(f"dev accuracy {dev_eval.metrics['accuracy']:.4f}, test accuracy "
                          f"{test_eval.metrics['accuracy']:.4f}, F1 {test_eval.metrics['f1']:.4f} "
                          f"({result.seconds:.0f} s of training)", flush=True)
    return RunResult(model, tokenizer, result, dev_eval, test_eval, summary)


def _short(metrics: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in metrics.items()}


# ---- what the notebook shows ---------------------------------------------------------------------------------------


def first_available(names: Sequence[str] = ("minilm", "course", "random:tiny")) -> str:
    """The first of ``names`` that loads offline on this machine (MiniLM needs its package, "course" the checkpoint)."""
    for name in names:
        arch = name[len(RANDOM_PREFIX):] if name.startswith(RANDOM_PREFIX) else name
        if arch in models.CONFIGS:
            return name
        try:
            models.resolve(arch, allow_hub=False)
        except (FileNotFoundError, ConnectionError):
            continue
        return name
    raise FileNotFoundError(f"none of {list(names)} is available offline: add 'random:tiny', which always is")


def comparison_table(rows: Sequence[dict]) -> str:
    """The comparison as aligned text: model, test accuracy, test F1, dev accuracy, training time, hardware."""
    def pct(split, row):
        return f"{row[split]['accuracy']:.1%}" if row.get(split) else "—"

    lines = [f"{'model':<55} {'test acc':>8} {'test F1':>8} {'dev acc':>8} {'train s':>8}  hardware"]
    for row in rows:
        if row.get("test") is None:
            lines.append(f"{row['label']:<55} {row['status']}")
            continue
        hw = row.get("hardware") or {}
        where = hw.get("gpu") or f"{hw.get('cpus')}-core CPU ({hw.get('torch_threads', '?')} thread(s))"
        star = "*" if row.get("note") else " "
        lines.append(f"{row['label']:<55} {pct('test', row):>8} {row['test']['f1']:>8.3f} {pct('dev', row):>8} "
                     f"{row['train_seconds']:>8.0f}{star} {where}, {row.get('date', '')}")
    lines += [f"* {row['label']}: {row['note']}" for row in rows if row.get("note")]
    return "\n".join(lines)
