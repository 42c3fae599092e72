"""Masked-LM pretraining: text → packed blocks → dynamic masks → the shared training loop.

Held-out evaluation uses *frozen* masks (drawn once, with a fixed seed), so every evaluation of every run scores
the same positions; :func:`unigram_baseline` scores a frequency-only predictor on exactly those positions.
:func:`run` is one complete run, as ``mlm-course pretrain`` does it: settings checked, data and model built, steps
planned, trained, results written.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import BertForMaskedLM, PreTrainedTokenizerBase

from mlm_course import corpus, masking, models, tokenization
from mlm_course.lab.precision import machine, make_accelerator
from mlm_course.lab.run_files import check_output_dir, write_json_atomic
from mlm_course.lab.runner import (
    InvalidSettings,
    TrainConfig,
    TrainLoop,
    TrainResult,
    check_enough_examples,
    cycle_batches,
    epoch_of,
    iterate_in_batches,
    load_saved_weights,
    step_generator,
)
from mlm_course.masking import MaskSpec
from mlm_course.objective import masked_lm_loss, masked_lm_outputs, masked_positions

EVAL_MASK_SEED = 1234
STATIC_MASK_STREAM = 100  # random stream of the static copies; per-step masks use streams 0..grad_accum-1


def pack_blocks(texts: list[str], tokenizer: PreTrainedTokenizerBase, seq_len: int) -> torch.Tensor:
    """Tokenise ``texts``, concatenate them and cut ``[CLS] … [SEP]`` blocks of exactly ``seq_len`` tokens."""
    if seq_len < 3:
        raise ValueError(f"seq_len must be at least 3 ([CLS] x [SEP]), got {seq_len}")
    pieces = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    stream = torch.tensor([token for piece in pieces for token in piece], dtype=torch.long)
    body = seq_len - 2
    n_blocks = len(stream) // body
    if n_blocks == 0:
        raise ValueError(
            f"the text has {len(stream)} tokens, fewer than one sequence of {body} (+2 special): "
            "give more text or a shorter seq_len"
        )
    blocks = stream[: n_blocks * body].view(n_blocks, body)
    cls = torch.full((n_blocks, 1), tokenizer.cls_token_id, dtype=torch.long)
    sep = torch.full((n_blocks, 1), tokenizer.sep_token_id, dtype=torch.long)
    return torch.cat([cls, blocks, sep], dim=1)


def _check_share(share: float) -> None:
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"short-sequence share {share} must be between 0 and 1")


def shorten_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, share: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut a random ``share`` of the blocks short (BERT's ``short_seq_prob``): (input ids, attention mask).

    A cut block keeps its first L - 1 tokens, with L uniform in 3 … seq_len, then ``[SEP]`` and padding, so the
    model also sees ``[SEP]`` early and short inputs like the sentences it will be asked about later.
    """
    _check_share(share)
    if share == 0:  # no random draws: runs without short sequences keep the masks they always had
        return blocks, torch.ones_like(blocks)
    count, length = blocks.shape
    cut = torch.rand(count, generator=generator) < share
    lengths = torch.where(cut, torch.randint(3, length + 1, (count,), generator=generator), length)
    attention = (torch.arange(length) < lengths[:, None]).long()
    ids = torch.where(attention.bool(), blocks, tokenizer.pad_token_id)
    ids[torch.arange(count), lengths - 1] = tokenizer.sep_token_id
    return ids, attention


def mask_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec, generator: torch.Generator,
    attention_mask: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """A masked-LM batch (input_ids, attention_mask, labels) from packed ``blocks`` (padding never selected)."""
    attention_mask = torch.ones_like(blocks) if attention_mask is None else attention_mask
    masked = masking.mask_tokens(
        blocks,
        special_ids=tokenizer.all_special_ids,
        attention_mask=attention_mask,
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer),
        spec=spec,
        generator=generator,
    )
    return {"input_ids": masked.input_ids, "attention_mask": attention_mask, "labels": masked.labels}


def frozen_eval_batches(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec, batch_size: int = 64
) -> list[dict[str, torch.Tensor]]:
    """Evaluation batches with masks drawn once from a fixed seed: the same positions at every evaluation."""
    generator = torch.Generator().manual_seed(EVAL_MASK_SEED)
    return [mask_blocks(blocks[part], tokenizer, spec, generator) for part in iterate_in_batches(len(blocks), batch_size)]


@torch.no_grad()
def evaluate_masked_lm(
    model: BertForMaskedLM, batches: list[dict[str, torch.Tensor]], *, accelerator=None
) -> dict[str, float]:
    """Loss (mean over all masked tokens), perplexity, top-1 and top-5 accuracy on frozen-mask batches.

    With an ``accelerator`` of several processes each scores every n-th batch and the sums are added up.
    """
    device = next(model.parameters()).device
    if accelerator is not None and accelerator.num_processes > 1:
        mine = batches[accelerator.process_index :: accelerator.num_processes]
        sums = torch.tensor(list(_masked_lm_sums(model, mine, device)), dtype=torch.float64, device=device)
        total_loss, top1, top5, count = accelerator.reduce(sums, reduction="sum").tolist()
        count = int(count)
    else:
        total_loss, top1, top5, count = _masked_lm_sums(model, batches, device)
    loss = total_loss / count
    return {"loss": loss, "perplexity": math.exp(loss), "top1": top1 / count, "top5": top5 / count, "tokens": count}


def _masked_lm_sums(model, batches, device) -> tuple[float, int, int, int]:
    total_loss, top1, top5, count = 0.0, 0, 0, 0
    for batch in batches:
        logits, labels = masked_lm_outputs(model, {k: v.to(device) for k, v in batch.items()})
        logits = logits.float()
        total_loss += float(F.cross_entropy(logits, labels, reduction="sum"))
        best = logits.topk(5, dim=-1).indices
        top1 += int((best[:, 0] == labels).sum())
        top5 += int((best == labels[:, None]).any(-1).sum())
        count += labels.numel()
    return total_loss, top1, top5, count


def _unigram_log_probs(train_blocks: torch.Tensor, vocab_size: int, special_ids: list[int]) -> torch.Tensor:
    counts = torch.bincount(train_blocks.flatten(), minlength=vocab_size).double() + 1
    counts[special_ids] = 0
    return (counts / counts.sum()).log()


def _scores(true_log_probs: torch.Tensor, hit1: torch.Tensor, hit5: torch.Tensor) -> dict[str, float]:
    loss = float(-true_log_probs.mean())
    return {"loss": loss, "perplexity": math.exp(loss), "top1": float(hit1.double().mean()),
            "top5": float(hit5.double().mean()), "tokens": true_log_probs.numel()}


def unigram_baseline(
    train_blocks: torch.Tensor, eval_batches: list[dict[str, torch.Tensor]], vocab_size: int, special_ids: list[int]
) -> dict[str, float]:
    """The same metrics for a predictor that ignores context: add-one-smoothed training token frequencies."""
    log_probs = _unigram_log_probs(train_blocks, vocab_size, special_ids)
    labels = torch.cat([b["labels"][b["labels"] != masking.IGNORE_INDEX] for b in eval_batches])
    best = log_probs.topk(5).indices
    return _scores(log_probs[labels], labels == best[0], torch.isin(labels, best))


def copying_baseline(
    train_blocks: torch.Tensor, eval_batches: list[dict[str, torch.Tensor]], vocab_size: int, special_ids: list[int],
    mask_token_id: int, spec: MaskSpec = MaskSpec(),
) -> dict[str, float]:
    """Unigram frequencies, plus a bet on the token shown at the position itself: what needs no context at all.

    A predicted position that shows a real token (not [MASK]) holds the true token with probability
    q = keep / (random + keep) of ``spec.mix`` (½ for 80/10/10), so this predictor says
    p(x) = q·[x = shown] + (1 − q)·unigram(x) there, and unigram(x) at [MASK]. (A random token that happens to
    be the true one is ignored.) A model's loss below this line is the part that comes from the context.
    """
    _, random_share, keep_share = spec.mix
    q = keep_share / (random_share + keep_share) if random_share + keep_share > 0 else 0.0
    unigram = _unigram_log_probs(train_blocks, vocab_size, special_ids).exp()
    kept = [b["labels"] != masking.IGNORE_INDEX for b in eval_batches]
    labels = torch.cat([b["labels"][k] for b, k in zip(eval_batches, kept, strict=True)])
    shown = torch.cat([b["input_ids"][k] for b, k in zip(eval_batches, kept, strict=True)])
    bet = torch.where(shown == mask_token_id, 0.0, q).double()
    true_log_probs = ((1 - bet) * unigram[labels] + bet * (labels == shown)).log()
    # the mixture's top 5 lie among the shown token and the unigram top 5 (only the shown token's score changes)
    top = unigram.topk(5).indices.expand(len(labels), 5)
    candidates = torch.cat([shown[:, None], top], dim=1)
    scores = (1 - bet[:, None]) * unigram[candidates]
    scores[:, 0] += bet
    scores[:, 1:][top == shown[:, None]] = -1.0  # the shown token is already candidate 0
    best = candidates.gather(1, scores.topk(5, dim=1).indices)
    return _scores(true_log_probs, best[:, 0] == labels, (best == labels[:, None]).any(1))


def pretrain(
    model: BertForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    train_blocks: torch.Tensor,
    eval_blocks: torch.Tensor,
    config: TrainConfig,
    *,
    spec: MaskSpec = MaskSpec(),
    eval_spec: MaskSpec = MaskSpec(),
    static_copies: int | None = None,
    short_share: float = 0.0,
    sparse: bool = True,
    out_dir: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool = True,
    accelerator=None,
) -> TrainResult:
    """Masked-LM pretraining; masks drawn by ``spec``; ``short_share`` of the sequences cut short (:func:`shorten_blocks`).

    Dynamic masking (``static_copies=None``, RoBERTa): a fresh mask every time a sequence is seen. Static masking
    (the original BERT's ``dupe_factor``): ``static_copies`` masked copies of the corpus are made once and epoch
    ``e`` uses copy ``e % static_copies``, so each mask comes back every ``static_copies`` epochs.

    Evaluation uses frozen masks drawn by ``eval_spec`` (BERT's 15 % 80/10/10 by default, whatever ``spec`` is),
    so held-out losses of runs with different training masks are comparable.

    Runs on :class:`mlm_course.lab.runner.TrainLoop`, also under ``accelerate launch`` (each process trains on its
    own micro-batches and scores its share of the held-out batches).
    """
    if static_copies is not None and (isinstance(static_copies, bool) or not isinstance(static_copies, int)
                                      or static_copies < 1):
        raise ValueError(f"static_copies={static_copies!r}: use a positive number of copies, or None for dynamic")
    _check_share(short_share)  # before any work, not at the first batch
    accelerator = accelerator or make_accelerator(config.device, config.precision)
    batch_for_step = training_batches(train_blocks, tokenizer, config, spec, static_copies=static_copies,
                                      short_share=short_share, slots=config.grad_accum * accelerator.num_processes)
    eval_batches = frozen_eval_batches(eval_blocks, tokenizer, eval_spec)

    def save(model: BertForMaskedLM, path: Path) -> None:
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)

    loop = TrainLoop(
        model, config, batch_for_step=batch_for_step,
        compute_loss=lambda m, batch: masked_lm_loss(m, batch, sparse=sparse),
        evaluate=lambda m: evaluate_masked_lm(m, eval_batches, accelerator=accelerator),
        out_dir=out_dir, save_model=save, load_model=load_saved_weights, progress=progress, accelerator=accelerator,
    )
    return loop.train(resume=resume)


def training_batches(
    train_blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, config: TrainConfig, spec: MaskSpec, *,
    static_copies: int | None, short_share: float, slots: int,
    make_batch: Callable[..., dict[str, torch.Tensor]] = mask_blocks,
) -> Callable[[int, int], dict[str, torch.Tensor]]:
    """``batch_for_step(step, slot)`` of :func:`pretrain`: the slot's rows of the step, masked (``slots``
    micro-batches per step over all processes); with ``static_copies``, rows of the epoch's masked copy.
    ``make_batch`` (:func:`mask_blocks`'s signature) masks the rows, e.g. with a bug to study."""
    pick = cycle_batches(len(train_blocks), config.batch_size, config.seed)

    def masked(blocks: torch.Tensor, generator: torch.Generator) -> dict[str, torch.Tensor]:
        ids, attention = shorten_blocks(blocks, tokenizer, short_share, generator)
        return make_batch(ids, tokenizer, spec, generator, attention_mask=attention)

    copies = [masked(train_blocks, step_generator(config.seed, copy, stream=STATIC_MASK_STREAM))
              for copy in range(static_copies or 0)]

    def batch_for_step(step: int, slot: int) -> dict[str, torch.Tensor]:
        rows = pick(step, slot, slots)
        if copies:
            epoch = epoch_of(step, slot, slots, len(train_blocks), config.batch_size)
            batch = {key: value[rows] for key, value in copies[epoch % len(copies)].items()}
        else:
            batch = masked(train_blocks[rows], step_generator(config.seed, step, stream=slot))
        return {**batch, "masked_positions": masked_positions(batch["labels"])}

    return batch_for_step


# ---- one complete run (`mlm-course pretrain`) ----------------------------------------------------------------------

CORPORA = ("course", "reviews")
PLAN_FILE, RESULTS_FILE = "plan.json", "results.json"


@dataclass
class PretrainSettings:
    """What :func:`run` pretrains, on which text, with which masks (the optimiser's settings: a TrainConfig).

    Field names are the command line's options (``mask_rate`` is ``--mask-rate``, ``model`` is ``--config``);
    every field is checked here, so a bad one is refused before any work (:class:`~mlm_course.lab.runner.InvalidSettings`).
    """

    model: str | None = None  # a size of models.CONFIGS ("small" by default); with init_from the saved model's size
    init_from: str | None = None  # 'course' or a save_pretrained folder: continued pretraining
    stack_to: int | None = None  # with init_from: grow the model to this many layers first (progressive stacking)
    corpus: str = "course"  # or "reviews": the unlabelled sentences of the sentiment training split
    max_chars: int | None = None  # use only this much training text (a tenth of it held out), for smoke runs
    seq_len: int = 128  # tokens per sequence, [CLS] and [SEP] included
    dropout: float = 0.1  # hidden and attention dropout
    mask_rate: float = 0.15
    mask_mix: tuple[float, float, float] = (0.8, 0.1, 0.1)
    scheme: str = "bernoulli"
    short_seq_prob: float = 0.0  # share of training sequences cut short (BERT's short_seq_prob)
    sparse: bool = True  # project only the masked positions to the vocabulary

    def __post_init__(self):
        problems = self._mask_problems()
        if self.model is not None and self.model not in models.CONFIGS:
            problems["model"] = f"{self.model!r} is not a model size: use one of {', '.join(models.CONFIGS)}"
        elif self.model is not None and self.init_from:
            problems["model"] = "is the size of the init_from model: leave it out"
        if self.stack_to is not None and not (self.init_from and self.stack_to >= 1):
            problems["stack_to"] = "grows a trained model: give a number of layers ≥ 1 together with init_from"
        if self.corpus not in CORPORA:
            problems["corpus"] = f"{self.corpus!r} is not known: use one of {', '.join(CORPORA)}"
        for name, low, ok in (("max_chars", 1, self.max_chars is None or self.max_chars >= 1),
                              ("seq_len", 3, self.seq_len >= 3)):
            if not ok:
                problems[name] = f"must be ≥ {low}, not {getattr(self, name)!r}"
        if not 0 <= self.dropout < 1:
            problems["dropout"] = f"must be in [0, 1), not {self.dropout!r}"
        if not 0 <= self.short_seq_prob <= 1:
            problems["short_seq_prob"] = f"is a share: it must be in [0, 1], not {self.short_seq_prob!r}"
        if problems:
            raise InvalidSettings("pretraining", problems)
        self.mask_mix = tuple(self.mask_mix)

    def _mask_problems(self) -> dict[str, str]:
        """Each mask field checked on its own by :class:`~mlm_course.masking.MaskSpec`; a rate of 0 masks nothing."""
        problems = {}
        for name, field in (("mask_rate", "rate"), ("mask_mix", "mix"), ("scheme", "scheme")):
            try:
                MaskSpec(**{field: getattr(self, name)})
            except ValueError as exc:
                problems[name] = f"is refused: {exc}"
        if "mask_rate" not in problems and self.mask_rate == 0:
            problems["mask_rate"] = "must be above 0: a rate of 0 gives no position to predict"
        return problems

    @property
    def mask(self) -> MaskSpec:
        return MaskSpec(rate=self.mask_rate, mix=self.mask_mix, scheme=self.scheme)


@dataclass
class RunResult:
    """A complete pretraining run: the trained model, its tokenizer, the loop's result and the results.json
    summary (None on the processes other than the main one)."""

    model: BertForMaskedLM
    tokenizer: PreTrainedTokenizerBase
    train: TrainResult
    summary: dict | None


def run(
    settings: PretrainSettings,
    config: TrainConfig,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    progress: bool = True,
    verbose: bool = True,
) -> RunResult:
    """Build the course tokenizer, the packed text and the model of ``settings``, plan the steps, pretrain, and
    write to ``out_dir``: ``plan.json``, checkpoints, ``metrics.jsonl``, the final model and tokenizer
    (save_pretrained) and ``results.json`` (held-out loss next to the unigram baseline's, steps, tokens, time).

    Everything is checked and built before anything is written: a bad setting leaves no ``out_dir`` behind. With
    ``config.minutes`` the step count is calibrated to fit the budget (``config.steps`` is not used); with
    ``resume`` the plan of the run in ``out_dir`` is kept and training continues from its latest checkpoint.
    """
    out = Path(out_dir)
    tokenizer = tokenization.course_tokenizer()
    train_blocks, eval_blocks = packed_text(settings, tokenizer)
    check_enough_examples(len(train_blocks), config.batch_size)
    model, name = starting_model(settings, tokenizer, config.seed)
    config = replace(config, extra={**config.extra, **_recorded_settings(settings, name)})
    accelerator = make_accelerator(config.device, config.precision)
    config = replace(config, steps=_planned_steps(out, resume, model, tokenizer, train_blocks, config, settings,
                                                  accelerator))
    check_output_dir(out)
    if accelerator.is_main_process:
        write_json_atomic(out / PLAN_FILE, {"steps": config.steps})
    if verbose:
        accelerator.print(f"{name}: {models.count_parameters(model)['total']:,} parameters; {len(train_blocks):,} "
                          f"training and {len(eval_blocks):,} held-out sequences of {settings.seq_len}; "
                          f"{config.steps:,} steps", flush=True)
    result = pretrain(model, tokenizer, train_blocks, eval_blocks, config, spec=settings.mask, sparse=settings.sparse,
                      short_share=settings.short_seq_prob, out_dir=out, resume=resume, progress=progress,
                      accelerator=accelerator)
    if not accelerator.is_main_process:
        return RunResult(model, tokenizer, result, None)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    summary = _summary(name, model, tokenizer, (train_blocks, eval_blocks), config, result, accelerator)
    write_json_atomic(out / RESULTS_FILE, summary)
    return RunResult(model, tokenizer, result, summary)


def packed_text(settings: PretrainSettings, tokenizer: PreTrainedTokenizerBase) -> tuple[torch.Tensor, torch.Tensor]:
    """(training, held-out) blocks of ``settings.seq_len`` tokens; the held-out text is always the course corpus's."""
    chars = settings.max_chars
    train = (corpus.pretraining_text("train", max_chars=chars) if settings.corpus == "course"
             else corpus.review_training_text(max_chars=chars))
    heldout = corpus.pretraining_text("heldout", max_chars=chars and max(chars // 10, 1))
    return pack_blocks([train], tokenizer, settings.seq_len), pack_blocks([heldout], tokenizer, settings.seq_len)


def starting_model(settings: PretrainSettings, tokenizer: PreTrainedTokenizerBase, seed: int
                   ) -> tuple[BertForMaskedLM, str]:
    """The model to pretrain and its size's name: fresh weights of ``settings.model``, or the ``init_from`` model
    (stacked to ``stack_to`` layers), always in fp32 (autocast does the rest)."""
    dropout = {"hidden_dropout_prob": settings.dropout, "attention_probs_dropout_prob": settings.dropout}
    if not settings.init_from:
        name = settings.model or "small"
        return models.build_model(name, tokenizer, seed=seed, max_length=settings.seq_len, **dropout), name
    model = models.load_for_training(settings.init_from, tokenizer, max_length=settings.seq_len,
                                     dtype=torch.float32, **dropout)  # transformers 5 keeps a bf16 folder in bf16
    name = next((size for size, shape in models.CONFIGS.items()
                 if all(getattr(model.config, k) == v for k, v in shape.items())), "custom")
    if settings.stack_to:
        model, name = models.stack_layers(model, settings.stack_to), f"{name} stacked to {settings.stack_to} layers"
    return model, name


def _recorded_settings(settings: PretrainSettings, name: str) -> dict:
    """What the checkpoints and results.json record of ``settings`` (``train_config.extra``)."""
    return {"model": name, "seq_len": settings.seq_len, "mask": asdict(settings.mask) | {"mix": list(settings.mask_mix)},
            "sparse_logits": settings.sparse, "dropout": settings.dropout, "init_from": settings.init_from,
            "stack_to": settings.stack_to, "short_seq_prob": settings.short_seq_prob, "corpus": settings.corpus}


def _planned_steps(out: Path, resume: bool, model, tokenizer, train_blocks, config: TrainConfig,
                   settings: PretrainSettings, accelerator) -> int:
    """The plan of the run being resumed, else the steps that fit ``config.minutes``, else ``config.steps``."""
    from accelerate.utils import broadcast_object_list

    if resume and (out / PLAN_FILE).exists():
        return json.loads((out / PLAN_FILE).read_text())["steps"]
    if config.minutes is None:
        return config.steps
    steps = calibrate_steps(model, tokenizer, train_blocks, config, settings.mask, settings.sparse, accelerator)
    return broadcast_object_list([steps])[0]  # every process runs the main process's count


def calibrate_steps(model, tokenizer, blocks, config: TrainConfig, spec: MaskSpec, sparse: bool,
                    accelerator=None) -> int:
    """Steps that fit ``config.minutes``, timed on a throw-away copy of the model (8 steps to warm up, then 20)."""
    import copy
    import time

    probe_model = copy.deepcopy(model)
    options = {"spec": spec, "sparse": sparse, "progress": False, "accelerator": accelerator}
    probe = replace(config, steps=8, minutes=None, eval_every=10**9, save_every=10**9)
    pretrain(probe_model, tokenizer, blocks, blocks[: probe.batch_size], probe, **options)
    start = time.perf_counter()
    pretrain(probe_model, tokenizer, blocks, blocks[: probe.batch_size], replace(probe, steps=20), **options)
    per_step = (time.perf_counter() - start) / 20
    return max(1, int(60 * config.minutes / per_step * 0.95))


def _summary(name: str, model, tokenizer, blocks: tuple[torch.Tensor, torch.Tensor], config: TrainConfig,
             result: TrainResult, accelerator) -> dict:
    """results.json: the last held-out evaluation next to the unigram baseline on the same frozen masks."""
    train_blocks, eval_blocks = blocks
    evals = [m for m in result.metrics if m["split"] == "eval"]
    baseline = unigram_baseline(train_blocks, frozen_eval_batches(eval_blocks, tokenizer, MaskSpec()),
                                len(tokenizer), tokenizer.all_special_ids)
    tokens_per_step = config.batch_size * config.grad_accum * accelerator.num_processes * train_blocks.shape[1]
    return {
        "config": name, "parameters": models.count_parameters(model), "steps": result.steps_done,
        "tokens_seen": result.steps_done * tokens_per_step, "processes": accelerator.num_processes,
        "seconds": round(result.seconds, 1), "heldout": evals[-1] if evals else None, "unigram_baseline": baseline,
        "train_config": asdict(config) | {"betas": list(config.betas)},
        "machine": machine(next(model.parameters()).device.type),
    }
