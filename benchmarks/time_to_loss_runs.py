"""The runs of ``bench_time_to_loss.py``: the clock (:class:`Recorder`), the course's loop (:class:`Stepper`),
transformers' ``Trainer`` and the course's loop with transformers' model, and the throughput timings. What each run is and why
is in ``bench_time_to_loss.py``'s docstring."""

from __future__ import annotations

import math
import os
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from transformers import (
    BertForMaskedLM,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from mlm_course import bert, corpus, precision, tokenization
from mlm_course.lab.batch_order import cycle_batches, step_batches
from mlm_course.lab.pretrain_run import PretrainConfig, seeded_batches
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.models import build_config, build_model, evaluation_mode
from mlm_course.objective import masked_lm_loss
from mlm_course.pretraining import frozen_eval_batches, mask_blocks, pack_blocks
from mlm_course.steps import training_step
from mlm_course.train import TrainConfig, optimiser_and_schedule

SEQ_LEN, BATCH, LR, BETAS, EPS, WARMUP, SCHEDULE = 128, 32, 3e-3, (0.9, 0.98), 1e-6, 700, 14_000
DEFAULTS_BATCH = 8
DEFAULTS_STEPS = SCHEDULE * BATCH // DEFAULTS_BATCH  # (b)'s schedule over the same 448,000 sequences as (a)'s
HEAD_SHARE = 0.15


@dataclass(frozen=True)
class Sizes:
    """How long and on how much text: the full benchmark or the CI smoke run."""

    budget_seconds: float = 30 * 60
    early_every: float = 10.0  # evaluation interval (training CPU-seconds) during the first minute
    early_until: float = 60.0
    every: float = 30.0
    train_chars: int | None = None
    heldout_chars: int | None = None
    throughput_steps: int = 30
    throughput_rounds: int = 3
    matmul_size: int = 2048

    def __post_init__(self):
        if not (self.early_every > 0 and self.every > 0 and self.budget_seconds > 0):
            raise ValueError(f"early_every, every and budget_seconds must be > 0 (CPU-seconds), not "
                             f"{self.early_every}, {self.every}, {self.budget_seconds}")


FULL = Sizes()
QUICK = Sizes(budget_seconds=1.5, early_every=0.3, early_until=0.6, every=0.5, train_chars=150_000,
              heldout_chars=8_000, throughput_steps=2, throughput_rounds=1, matmul_size=256)

# ---- data ------------------------------------------------------------------------------------------------------


@dataclass
class Data:
    tokenizer: object
    train_blocks: torch.Tensor
    heldout_blocks: torch.Tensor
    eval_batches: list
    train_chars: int | None = None

    def packed(self, seq_len: int) -> torch.Tensor:
        """The same training text in blocks of ``seq_len`` tokens."""
        return pack_blocks([corpus.pretraining_text("train", max_chars=self.train_chars)], self.tokenizer, seq_len)


def load_data(sizes: Sizes) -> Data:
    tok = tokenization.course_tokenizer()
    train = pack_blocks([corpus.pretraining_text("train", max_chars=sizes.train_chars)], tok, SEQ_LEN)
    heldout = pack_blocks([corpus.pretraining_text("heldout", max_chars=sizes.heldout_chars)], tok, SEQ_LEN)
    return Data(tok, train, heldout, frozen_eval_batches(heldout, tok), sizes.train_chars)


def paragraph_rows(tokenizer, max_chars: int | None) -> torch.Tensor:
    """No packing: each paragraph of the training text starts a new ``[CLS] … [SEP]`` row (one longer than 126
    tokens continues in the next rows, so no text is lost), padded to 128 with ``[PAD]``."""
    paragraphs = corpus.pretraining_text("train", max_chars=max_chars).split("\n\n")
    body = SEQ_LEN - 2
    rows = []
    for ids in tokenizer(paragraphs, add_special_tokens=False, verbose=False)["input_ids"]:
        for begin in range(0, max(len(ids), 1), body):
            piece = [tokenizer.cls_token_id, *ids[begin:begin + body], tokenizer.sep_token_id]
            rows.append(piece + [tokenizer.pad_token_id] * (SEQ_LEN - len(piece)))
    return torch.tensor(rows, dtype=torch.long)


def mask_padded(blocks, tokenizer, spec, generator, attention_mask=None):
    """:func:`~mlm_course.pretraining.mask_blocks` with the attention mask read off the padding."""
    return mask_blocks(blocks, tokenizer, spec, generator, attention_mask=(blocks != tokenizer.pad_token_id).long())


# ---- the clock and the curve ------------------------------------------------------------------------------------


class Recorder:
    """A run's held-out curve against its training CPU time: ``clock()`` since :meth:`start` minus the CPU time of
    the evaluations. :meth:`after_step` evaluates when the next mark is due and says when to stop. The clock is
    the process's CPU time, or (runs taking turns in threads of one process, :class:`Turns`) the thread's; then
    ``between_steps`` hands the turn over when it is due."""

    def __init__(self, evaluate, sizes: Sizes, *, tokens_per_step: int, targets: list[float] | None,
                 partial: Path | None = None, clock=time.process_time, between_steps=None):
        self.evaluate_fn, self.sizes, self.tokens_per_step, self.targets = evaluate, sizes, tokens_per_step, targets
        self.partial = partial  # the curve so far, rewritten after each evaluation (for a look while it runs)
        self.clock, self.between_steps = clock, between_steps
        self.curve: list[dict] = []
        self.next_mark, self.eval_cpu, self.start_cpu, self.start_wall = 0.0, 0.0, 0.0, 0.0
        self.stopped = "schedule end"

    def start(self) -> None:
        self.start_cpu, self.start_wall, self.eval_cpu = self.clock(), time.perf_counter(), 0.0

    def training_seconds(self) -> float:
        return self.clock() - self.start_cpu - self.eval_cpu

    def evaluate(self, model: torch.nn.Module, step: int, seconds: float) -> None:
        begin = self.clock()
        with torch.autocast("cpu", enabled=False):
            scores = self.evaluate_fn(model)
        self.curve.append({"cpu_seconds": round(seconds, 3), "step": step, "tokens": step * self.tokens_per_step,
                           **{k: scores[k] for k in ("loss", "top1", "top5")},
                           "wall_seconds": round(time.perf_counter() - self.start_wall, 1) if step else 0.0,
                           "load1": os.getloadavg()[0]})
        if self.partial is not None:
            write_json_atomic(self.partial, {"curve": self.curve})
        self.eval_cpu += self.clock() - begin  # (the evaluation at step 0 comes before start())
        sizes = self.sizes
        while self.next_mark <= seconds:
            self.next_mark += sizes.early_every if self.next_mark < sizes.early_until else sizes.every

    def reached_every_target(self) -> bool:
        return bool(self.targets) and min(p["loss"] for p in self.curve) <= min(self.targets)

    def after_step(self, model: torch.nn.Module, step: int) -> bool:
        """Evaluate if a mark is due or the budget is spent; True when the run should stop."""
        if self.between_steps is not None:
            self.between_steps()
        seconds = self.training_seconds()
        over = seconds >= self.sizes.budget_seconds
        if over or seconds >= self.next_mark:
            self.evaluate(model, step, seconds)
        if over:
            self.stopped = "budget"
        elif self.reached_every_target():
            self.stopped = "every target reached"
        return self.stopped != "schedule end"

    def finish(self, model: torch.nn.Module, step: int) -> dict:
        seconds = self.training_seconds()
        if self.curve[-1]["step"] != step:
            self.evaluate(model, step, seconds)
        return {"curve": self.curve, "steps": step, "tokens": step * self.tokens_per_step, "stopped": self.stopped,
                "train_cpu_seconds": round(seconds, 2), "eval_cpu_seconds": round(self.eval_cpu, 2),
                "wall_seconds": round(time.perf_counter() - self.start_wall, 1),
                "tokens_per_cpu_second": round(step * self.tokens_per_step / seconds, 1)}


class Turns:
    """Runs that take turns, round robin, each in its own thread of one process: a run trains until its thread's
    CPU clock has advanced ``chunk`` seconds, then hands over, so a neighbour's job on the machine slows every run
    alike. Each turn records the thread's CPU time, the process's CPU time and the wall time: the first two agree
    when no other thread of the process worked during the turn (the clock check)."""

    def __init__(self, names: list[str], chunk: float):
        if not chunk > 0 or len(set(names)) != len(names) or not names:
            raise ValueError(f"turns need distinct run names and a chunk > 0 CPU-seconds, not {names}, {chunk}")
        self.order, self.chunk, self.finished, self.current = list(names), chunk, set(), names[0]
        self.began: dict[str, tuple[float, float, float]] = {}
        self.turns: dict[str, list[list[float]]] = {name: [] for name in names}
        self.condition = threading.Condition()

    @staticmethod
    def _now() -> tuple[float, float, float]:
        return time.thread_time(), time.process_time(), time.perf_counter()

    def wait(self, name: str) -> None:
        with self.condition:
            self.condition.wait_for(lambda: self.current == name)
        self.began[name] = self._now()

    def hand_over_if_due(self, name: str) -> None:
        if time.thread_time() - self.began[name][0] >= self.chunk:
            self._end_turn(name)
            self.wait(name)

    def _end_turn(self, name: str, finished: bool = False) -> None:
        self.turns[name].append([round(b - a, 4) for a, b in zip(self.began[name], self._now(), strict=True)])
        with self.condition:
            if finished:
                self.finished.add(name)
            start = self.order.index(name) + 1
            after = [n for n in self.order[start:] + self.order[:start] if n not in self.finished]
            self.current = after[0] if after else None
            self.condition.notify_all()

    def run(self, work: dict) -> dict:
        """``work[name]()`` for every run, taking turns; their results by name (the first error is raised)."""
        results, errors = {}, {}

        def thread(name: str) -> None:
            torch.set_num_threads(1)  # OpenMP's thread count is per thread: set it in each
            self.wait(name)
            try:
                results[name] = work[name]()
            except BaseException as error:  # noqa: BLE001 - handed to the caller below
                errors[name] = error
            finally:
                self._end_turn(name, finished=True)

        threads = [threading.Thread(target=thread, args=(name,), name=name) for name in self.order]
        for each in threads:
            each.start()
        for each in threads:
            each.join()
        if errors:
            raise next(iter(errors.values()))
        return results

    def clock_check(self, name: str) -> dict:
        """The run's turns: how many, their thread and process CPU-seconds, wall seconds, and the CPU share."""
        thread_cpu, process_cpu, wall = (sum(turn[i] for turn in self.turns[name]) for i in range(3))
        return {"turns": len(self.turns[name]), "thread_cpu_seconds": round(thread_cpu, 3),
                "process_cpu_seconds": round(process_cpu, 3), "wall_seconds": round(wall, 3),
                "process_over_thread_cpu": round(process_cpu / thread_cpu, 3) if thread_cpu else None,
                "cpu_share_of_wall": round(thread_cpu / wall, 3) if wall else None}


# ---- the course's loop, one step at a time -----------------------------------------------------------------------


def course_config(precision_used: str, **changes) -> PretrainConfig:
    """(a)'s settings (the shipped checkpoint's first stage), with ``changes``."""
    settings = {"size": "tiny", "seq_len": SEQ_LEN, "batch_size": BATCH, "lr": LR, "betas": BETAS, "eps": EPS,
                "weight_decay": 0.01, "warmup_steps": WARMUP, "steps": SCHEDULE, "max_grad_norm": 1.0,
                "dropout": 0.0, "sparse_logits": True, "short_seq_prob": 0.0, "precision": precision_used,
                "seed": 0, "log_every": 100, "eval_every": 1, "save_every": 10**9, "device": "cpu"}
    return PretrainConfig(**(settings | changes))


class Stepper:
    """The course's loop one optimiser step at a time, for runs that a clock stops and for interleaved timings: the
    lessons' :func:`~mlm_course.steps.training_step` with fused AdamW and BERT's schedule
    (:func:`mlm_course.train.optimiser_and_schedule`), micro-batch ``(step, 0)`` of ``batch_for_step`` with its
    dropout seeded as :func:`~mlm_course.lab.batch_order.step_batches` seeds it, on ``device`` (this CPU unless
    given) in ``config``'s precision."""

    def __init__(self, model: torch.nn.Module, config: TrainConfig, batch_for_step, loss_fn, *, seed: int = 0,
                 device: str = "cpu"):
        device = torch.device(device)
        self.model, self.config, self.loss_fn, self.step = model.float().to(device), config, loss_fn, 0
        self.dtype = precision.autocast_dtype(device, config.precision)
        self.optimizer, self.scheduler = optimiser_and_schedule(self.model, config, device)
        self.batches = step_batches(batch_for_step, 1, seed)
        self.description = precision.describe(device, self.dtype)

    def run_step(self) -> None:
        training_step(self.model, [next(self.batches)], self.loss_fn, self.optimizer, self.scheduler,
                      max_grad_norm=self.config.max_grad_norm, dtype=self.dtype)
        self.step += 1


def train_in_course_loop(stepper: Stepper, recorder: Recorder, evaluated=None) -> dict:
    """The course's loop, evaluated by ``recorder`` after every step (it decides by the clock whether to score),
    stopped by it or by the end of the schedule."""
    scored = evaluated or stepper.model
    recorder.evaluate(scored, 0, 0.0)
    recorder.start()
    while stepper.step < stepper.config.steps:
        stepper.run_step()
        with evaluation_mode(stepper.model), torch.no_grad():
            if recorder.after_step(scored, stepper.step):
                break
    return recorder.finish(scored, stepper.step) | {"runner": stepper.description}


def run_course(data: Data, sizes: Sizes, chosen: str, name: str, recorder_for, device: str = "cpu") -> dict:
    changes = {"course_full_logits": {"sparse_logits": False}, "course_dropout": {"dropout": 0.1},
               "course_short_seq": {"short_seq_prob": 0.1}, "course_fp32": {"precision": "fp32"}}.get(name, {})
    config = course_config(chosen, **changes)
    if name == "course_no_packing":
        blocks = paragraph_rows(data.tokenizer, sizes.train_chars)
        extra = {"rows": len(blocks), "real_token_share": round(float((blocks != data.tokenizer.pad_token_id)
                                                                         .float().mean()), 4)}
        return extra | run_recipe(data, config, recorder_for, blocks=blocks, make_batch=mask_padded)
    return run_recipe(data, replace(config, device=device), recorder_for)


def run_recipe(data: Data, config: PretrainConfig, recorder_for, *, blocks: torch.Tensor | None = None,
               make_batch=mask_blocks) -> dict:
    """``config``'s recipe in the course's loop, on ``blocks`` (default: the training text packed in
    ``config.seq_len``-token blocks), scored on the 128-token held-out set, on ``config.device``."""
    if blocks is None:
        blocks = data.train_blocks if config.seq_len == SEQ_LEN else data.packed(config.seq_len)
    model = build_model(config.size, data.tokenizer, seed=config.seed, max_positions=max(SEQ_LEN, config.seq_len),
                        dropout=config.dropout)
    recorder = recorder_for(config.batch_size * config.seq_len)
    batches = seeded_batches(blocks, data.tokenizer, config, slots=1, make_batch=make_batch)
    stepper = Stepper(model, config.train_config(), batches, masked_lm_loss, seed=config.seed,
                      device=config.device)
    outcome = train_in_course_loop(stepper, recorder)
    settings = {k: v for k, v in vars(config).items() if k not in ("eval_every", "save_every", "log_every")}
    return {"settings": settings | {"betas": list(config.betas), "mask_mix": list(config.mask_mix)}, **outcome}


# ---- transformers -----------------------------------------------------------------------------------------------


class MaskedLMAdapter(torch.nn.Module):
    """``BertForMaskedLM`` behind the course model's call, ``forward(input_ids, attention_mask, positions=)``, so
    :func:`~mlm_course.pretraining.masked_predictions` scores it like ours: its own encoder (``.bert``) and head
    (``.cls``), the head at ``positions`` only (the same numbers as its full logits there)."""

    def __init__(self, model: BertForMaskedLM):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask=None, positions=None):
        hidden = self.model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if positions is not None:
            hidden = hidden.flatten(0, 1)[positions]
        return self.model.cls(hidden)


def transformers_model(tokenizer, seed: int = 0) -> BertForMaskedLM:
    """``BertForMaskedLM`` of the course's tiny size as it comes (dropout 0.1, SDPA attention)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BertForMaskedLM(build_config("tiny", tokenizer, max_positions=SEQ_LEN))


def trainer_arguments(name: str, out: str, chosen: str, device: str = "cpu") -> dict:
    """TrainingArguments of (b) (defaults, a schedule over 448,000 sequences) or (c) (the course's optimiser and
    the precision auto picked for (a), bf16 autocast where that is faster on this CPU), on ``device``."""
    common = {"output_dir": out, "report_to": "none", "save_strategy": "no", "disable_tqdm": True,
              "use_cpu": device == "cpu"}
    if name == "transformers_defaults":
        return common | {"max_steps": DEFAULTS_STEPS}
    lr = 1e-3 if name == "transformers_tuned_lr1e-3" else LR
    return common | {"max_steps": SCHEDULE, "learning_rate": lr, "adam_beta1": BETAS[0], "adam_beta2": BETAS[1],
                     "adam_epsilon": EPS, "weight_decay": 0.01, "warmup_steps": WARMUP,
                     "lr_scheduler_type": "linear", "per_device_train_batch_size": BATCH, "max_grad_norm": 1.0,
                     "bf16": chosen == "bf16", "fp16": chosen == "fp16"}


class ClockCallback(TrainerCallback):
    """Scores the untrained model, starts the clock, then lets the recorder evaluate and stop after each step."""

    def __init__(self, recorder: Recorder, scored: torch.nn.Module):
        self.recorder, self.scored = recorder, scored

    def on_train_begin(self, args, state, control, **kwargs):
        self.recorder.evaluate(self.scored, 0, 0.0)
        self.recorder.start()

    def on_step_end(self, args, state, control, **kwargs):
        if self.recorder.after_step(self.scored, state.global_step):
            control.should_training_stop = True


def run_trainer(data: Data, name: str, chosen: str, recorder_for, device: str = "cpu") -> dict:
    model = transformers_model(data.tokenizer)
    adapter = MaskedLMAdapter(model)
    collator = DataCollatorForLanguageModeling(data.tokenizer, mlm_probability=0.15)
    dataset = [{"input_ids": row} for row in data.train_blocks.tolist()]
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(**trainer_arguments(name, out, chosen, device))
        recorder = recorder_for(args.per_device_train_batch_size * SEQ_LEN)
        trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator,
                          callbacks=[ClockCallback(recorder, adapter)])
        trainer.train()
        outcome = recorder.finish(adapter, trainer.state.global_step)
    keys = ("learning_rate", "per_device_train_batch_size", "max_steps", "warmup_steps", "lr_scheduler_type",
            "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "optim", "seed", "bf16", "use_cpu")
    settings = {key: str(getattr(args, key)) if key in ("optim", "lr_scheduler_type") else getattr(args, key)
                for key in keys}
    return {"settings": settings | {"dropout": model.config.hidden_dropout_prob, "attention": "sdpa"}, **outcome,
            "torch_threads_in_trainer": torch.get_num_threads()}


def collator_batches(blocks: torch.Tensor, collator, batch_size: int, seed: int = 0):
    """``batch_for_step`` for the course's loop from transformers' collator (rows in the course's seeded order)."""
    pick, rows = cycle_batches(len(blocks), batch_size, seed), blocks.tolist()

    def batch_for_step(step: int, slot: int) -> dict:
        return dict(collator([{"input_ids": rows[i]} for i in pick(step, slot, 1).tolist()]))

    return batch_for_step


def transformers_loop_config(precision_used: str) -> TrainConfig:
    """(c)'s optimiser, batch, schedule and precision in the course's loop."""
    return TrainConfig(batch_size=BATCH, lr=LR, betas=BETAS, eps=EPS, weight_decay=0.01, warmup_steps=WARMUP,
                       steps=SCHEDULE, max_grad_norm=1.0, precision=precision_used, log_every=100)


def transformers_loss(model, batch) -> torch.Tensor:
    return model(**batch).loss


def run_transformers_in_course_loop(data: Data, chosen: str, recorder_for) -> dict:
    model = transformers_model(data.tokenizer)
    collator = DataCollatorForLanguageModeling(data.tokenizer, mlm_probability=0.15, seed=0)
    recorder = recorder_for(BATCH * SEQ_LEN)
    config = transformers_loop_config(chosen)
    stepper = Stepper(model, config, collator_batches(data.train_blocks, collator, BATCH), transformers_loss)
    outcome = train_in_course_loop(stepper, recorder, evaluated=MaskedLMAdapter(model))
    settings = {k: v for k, v in vars(config).items() if k not in ("eval_every", "log_every", "keep_best")}
    return {"settings": settings | {"betas": list(BETAS), "dropout": 0.1, "loss": "m(**batch).loss"}, **outcome}


# ---- throughput and the matmul rate ------------------------------------------------------------------------------


def cpu_time_matmul_tflops(dtype: torch.dtype, size: int = 2048, repeats: int = 3) -> float:
    """:func:`mlm_course.precision.cpu_matmul_tflops` on this process's CPU clock (a neighbour's load does not
    count), the peak the runs' CPU-time FLOP/s are measured against."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        torch.mm(a, b)
        best = min(best, time.process_time() - start)
    return 2 * size**3 / best / 1e12


def matmul_rates(size: int = 2048) -> dict:
    """This CPU's matmul rate on one thread, fp32 and bf16, on the CPU clock and (the library's) on the wall clock."""
    return {name: {"cpu_clock_tflops": round(cpu_time_matmul_tflops(dtype, size), 4),
                   "wall_clock_tflops": round(precision.cpu_matmul_tflops(dtype, size), 4)}
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}


def throughput_loops(data: Data, chosen: str) -> dict[str, Stepper]:
    """One stepper per candidate, each with its own model and batches, never evaluating."""
    def course(**changes) -> Stepper:
        config = course_config(chosen, eval_every=10**9, **changes)
        model = build_model("tiny", data.tokenizer, seed=0, max_positions=SEQ_LEN, dropout=config.dropout)
        return Stepper(model, config.train_config(), seeded_batches(data.train_blocks, data.tokenizer, config,
                                                                      slots=1), masked_lm_loss, seed=config.seed)

    def transformers(precision_used: str) -> Stepper:
        collator = DataCollatorForLanguageModeling(data.tokenizer, mlm_probability=0.15, seed=0)
        return Stepper(transformers_model(data.tokenizer), transformers_loop_config(precision_used),
                       collator_batches(data.train_blocks, collator, BATCH), transformers_loss)

    return {"course": course(), "course_fp32": course(precision="fp32"),
            "ours_doing_transformers_work": course(dropout=0.1, sparse_logits=False),
            "ours_doing_transformers_work_fp32": course(precision="fp32", dropout=0.1, sparse_logits=False),
            "transformers_in_course_loop": transformers(chosen),
            "transformers_in_course_loop_fp32": transformers("fp32")}


def run_throughput(data: Data, sizes: Sizes, chosen: str) -> dict:
    """CPU-seconds per step of each candidate: ``rounds`` rounds of ``steps`` steps each after one warm-up step,
    the candidates in turn each round (a busy machine slows all alike); the median round counts."""
    loops = throughput_loops(data, chosen)
    per_step: dict[str, list[float]] = {name: [] for name in loops}
    for loop in loops.values():
        loop.run_step()
    for _ in range(sizes.throughput_rounds):
        for name, loop in loops.items():
            start = time.process_time()
            for _ in range(sizes.throughput_steps):
                loop.run_step()
            per_step[name].append((time.process_time() - start) / sizes.throughput_steps)
    config = build_config("tiny", data.tokenizer, max_positions=SEQ_LEN)
    seconds = {name: sorted(times)[len(times) // 2] for name, times in per_step.items()}
    return {"cpu_seconds_per_step": {k: round(v, 4) for k, v in seconds.items()},
            "rounds": per_step, "tokens_per_step": BATCH * SEQ_LEN,
            "tokens_per_cpu_second": {k: round(BATCH * SEQ_LEN / v, 1) for k, v in seconds.items()},
            "flops_per_token": {"sparse (15 % of positions)": bert.flops_per_token(config, SEQ_LEN,
                                                                                    head_share=HEAD_SHARE),
                                "full logits": bert.flops_per_token(config, SEQ_LEN)},
            "descriptions": {loop_name: loop.description for loop_name, loop in loops.items()}}
