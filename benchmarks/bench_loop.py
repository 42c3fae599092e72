"""The loop on one screen (mlm_course.train.train) against the command line's loop (its Accelerate edition,
mlm_course.train.train_with_accelerate, as mlm_course.lab.pretrain_run.pretrain and finetune_run.fit run it), on this
CPU: tokens per CPU-second of the same training, for pretraining and for fine-tuning; for fine-tuning also
transformers' ``Trainer`` on ``BertForSequenceClassification`` from the same checkpoint, at the same precision, batch
and recipe.

    .venv/bin/python benchmarks/bench_loop.py            # writes benchmarks/results/loop.json
    .venv/bin/python benchmarks/bench_loop.py --quick    # a smoke run (seconds); writes only with --out

Both run the one training step (mlm_course.steps.training_step) with the same model, batch size, recipe and fp32, on
one torch thread, no evaluation; what differs is everything around the step (Accelerate's prepared model and
optimiser, the command line's seeded batches per step and its run files; the plain loop's endless batch iterator). Each round times every candidate once, in
turn, so a neighbour's job slows all alike; the figure is the median over rounds of tokens / process CPU-seconds
(CPU time of this process, so time the machine gave to other jobs is not counted), with the load average recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import timing  # benchmarks/timing.py (run as a script, this folder is on sys.path)
import torch

from mlm_course import corpus, finetune, models, tokenization
from mlm_course.lab.finetune_run import FinetuneConfig, fit
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain
from mlm_course.objective import masked_lm_loss
from mlm_course.precision import machine
from mlm_course.pretraining import pack_blocks, training_batches
from mlm_course.train import TrainConfig, train

RESULTS = Path(__file__).resolve().parent / "results" / "loop.json"


def pretraining_candidates(steps: int, chars: int) -> dict:
    tok = tokenization.course_tokenizer()
    blocks = pack_blocks([corpus.pretraining_text("train", max_chars=chars)], tok, 128)

    def model():
        return models.build_model("tiny", tok, seed=0, max_positions=128, dropout=0.0)

    def accelerate():
        config = PretrainConfig(steps=steps, batch_size=32, lr=3e-3, warmup_ratio=0.1, dropout=0.0, eval_every=10**6,
                                save_every=10**6, log_every=10, precision="fp32", device="cpu")
        return pretrain(model(), tok, blocks, None, config).tokens

    def loop():
        config = TrainConfig(steps=steps, batch_size=32, log_every=10)
        return train(model(), training_batches(blocks, tok, 32), masked_lm_loss, config, device="cpu").tokens

    return {"accelerate": accelerate, "train": loop}


def fine_tuning_candidates(steps: int) -> dict:
    tok = tokenization.course_tokenizer()
    data = finetune.sentiment_data(tok, "train")

    def model():
        return finetune.load_classifier("course", seed=0)[0]

    def accelerate():
        config = FinetuneConfig(model="course", epochs=100, steps=steps, batch_size=32, lr=5e-4, warmup_ratio=0.1,
                                patience=None, log_every=10, precision="fp32", device="cpu")
        return fit(model(), data, None, config, pad_token_id=tok.pad_token_id, progress=False, verbose=False).tokens

    def loop():
        config = TrainConfig.fine_tuning(steps=steps, log_every=10, keep_best=None)  # no evaluation: none to keep
        batches = finetune.training_batches(data, 32, pad_token_id=tok.pad_token_id)
        return train(model(), batches, finetune.classification_loss, config, device="cpu").tokens

    return {"accelerate": accelerate, "train": loop, "trainer": lambda: trainer_tokens(tok, data, steps)}


def trainer_tokens(tok, data: finetune.Encoded, steps: int) -> int:
    """transformers' ``Trainer`` fine-tuning ``BertForSequenceClassification`` from the same checkpoint, fp32, batch
    32, the same peak rate, warm-up share and weight decay, its own padding collator (each batch padded to its
    longest sentence, in a random order: no length buckets); returns the input positions it trained on."""
    from transformers import (
        BertForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    pad, counted = DataCollatorWithPadding(tok), []

    def collate(rows: list[dict]) -> dict:
        batch = pad(rows)
        counted.append(batch["input_ids"].numel())
        return batch

    rows = [{"input_ids": ids, "labels": label} for ids, label in zip(data.input_ids, data.labels, strict=True)]
    net = BertForSequenceClassification.from_pretrained(models.resolve("course"), num_labels=2)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=32, max_steps=steps, learning_rate=5e-4,
                                 warmup_steps=max(1, steps // 10), weight_decay=0.01, report_to="none",
                                 save_strategy="no", logging_strategy="no", disable_tqdm=True, use_cpu=True, seed=0)
        Trainer(model=net, args=args, train_dataset=rows, data_collator=collate).train()
    return sum(counted)


def tokens_per_cpu_second(candidates: dict, rounds: int) -> dict:
    """Median over ``rounds`` of each candidate's tokens / CPU-seconds, the candidates timed in turn each round."""
    rates: dict[str, list[float]] = {name: [] for name in candidates}
    loads = []
    for _ in range(rounds):
        for name, run in candidates.items():
            start = time.process_time()
            tokens = run()
            rates[name].append(tokens / (time.process_time() - start))
            loads.append(os.getloadavg()[0])
    return {"tokens_per_cpu_second": {name: round(statistics.median(v)) for name, v in rates.items()},
            "every_round": {name: [round(r) for r in v] for name, v in rates.items()},
            "load_average_1min": {"min": min(loads), "max": max(loads)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few steps of a small slice (smoke run)")
    parser.add_argument("--out", type=Path, default=None, help=f"results JSON (default {RESULTS}, not with --quick)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    steps, rounds, chars = (3, 1, 200_000) if args.quick else (60, 5, 2_000_000)
    document = {"what": "the one-screen loop (train) against the command line's (train_with_accelerate through "
                        "pretrain and fit), the same model, batch 32 and recipe, fp32, one thread, no evaluation; "
                        "fine-tuning also against transformers' Trainer (BertForSequenceClassification, the same "
                        "checkpoint, batch, precision and recipe, its own padding collator)",
                "steps_per_run": steps, "rounds": rounds}
    for task, candidates in (("pretraining (tiny, 32 x 128)", pretraining_candidates(steps, chars)),
                             ("fine-tuning (the course checkpoint, 32 sentences)", fine_tuning_candidates(steps))):
        result = tokens_per_cpu_second(candidates, rounds)
        rates = result["tokens_per_cpu_second"]
        document[task] = {**result, "train_over_accelerate": round(rates["train"] / rates["accelerate"], 3)}
        if "trainer" in rates:
            document[task]["accelerate_over_trainer"] = round(rates["accelerate"] / rates["trainer"], 3)
    document["machine"] = {**machine(torch.device("cpu")), "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(document, indent=2))
    timing.save_results(document, args.out, RESULTS, smoke=args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
