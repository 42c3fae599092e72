"""Masked-LM pretraining throughput: our loop vs transformers.Trainer, same model, data and batch, same run.

    python benchmarks/bench_pretraining.py                 # small config, 128 × 32, 20 steps each
    python benchmarks/bench_pretraining.py --quick         # tiny sizes, seconds (CI smoke)

Reports tokens/s for (a) our loop with logits only at masked positions, (b) our loop with full logits,
(c) ``transformers.Trainer`` + ``BertForMaskedLM`` + ``DataCollatorForLanguageModeling`` with default settings,
the ratios, and our achieved FLOP/s as a fraction of this machine's measured fp32 matmul peak.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

from mlm_course import corpus, tokenization
from mlm_course.device import machine
from mlm_course.models import build_model, count_parameters
from mlm_course.pretraining import MaskSpec, pack_blocks, pretrain
from mlm_course.training import TrainConfig

RESULTS = Path(__file__).parent / "results" / "pretraining.json"


def matmul_peak_gflops(size: int = 1024, repeats: int = 10) -> float:
    """Best fp32 matmul rate of this machine (GFLOP/s) over a few square products."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def flops_per_token(model, seq_len: int, mask_rate: float, sparse: bool) -> float:
    """Training FLOPs per token: 6 × (encoder + head-transform parameters) + attention + the vocabulary projection."""
    cfg = model.config
    counts = count_parameters(model)
    dense = counts["encoder"] + cfg.hidden_size * cfg.hidden_size  # head transform
    attention = 12 * cfg.num_hidden_layers * seq_len * cfg.hidden_size  # QK^T and AV, forward + backward
    projected = mask_rate if sparse else 1.0
    return 6 * dense + attention + 6 * cfg.hidden_size * cfg.vocab_size * projected


def time_ours(model, tok, blocks, steps: int, batch: int, sparse: bool) -> float:
    config = TrainConfig(steps=steps, batch_size=batch, lr=1e-4, warmup=0, eval_every=10**9, device="cpu")
    start = time.perf_counter()
    pretrain(model, tok, blocks, blocks[:batch], config, spec=MaskSpec(), sparse=sparse, progress=False)
    return time.perf_counter() - start


def time_trainer(model, tok, blocks, steps: int, batch: int) -> float:
    dataset = [{"input_ids": row} for row in blocks.tolist()]
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=batch, max_steps=steps, learning_rate=1e-4,
                                 report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True,
                                 disable_tqdm=True, dataloader_num_workers=0)
        trainer = Trainer(model=model, args=args, train_dataset=dataset,
                          data_collator=DataCollatorForLanguageModeling(tok, mlm_probability=0.15))
        start = time.perf_counter()
        trainer.train()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="small")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run; writes no results file")
    args = parser.parse_args()
    if args.quick:
        args.config, args.steps, args.batch_size, args.seq_len = "tiny", 3, 4, 32
    hf_logging.set_verbosity_error()
    tok = tokenization.course_tokenizer()
    blocks = pack_blocks([corpus.pretraining_text("train", max_chars=2_000_000)], tok, args.seq_len)
    tokens = args.steps * args.batch_size * args.seq_len
    seconds = {}
    for name, run in [
        ("ours_sparse_logits", lambda m: time_ours(m, tok, blocks, args.steps, args.batch_size, sparse=True)),
        ("ours_full_logits", lambda m: time_ours(m, tok, blocks, args.steps, args.batch_size, sparse=False)),
        ("transformers_trainer", lambda m: time_trainer(m, tok, blocks, args.steps, args.batch_size)),
    ]:
        seconds[name] = run(build_model(args.config, tok, seed=0, max_length=args.seq_len))
    peak = matmul_peak_gflops()
    model = build_model(args.config, tok, max_length=args.seq_len)
    achieved = flops_per_token(model, args.seq_len, 0.15, sparse=True) * tokens / seconds["ours_sparse_logits"] / 1e9
    result = {
        "config": args.config, "steps": args.steps, "batch_size": args.batch_size, "seq_len": args.seq_len,
        "tokens_per_second": {k: round(tokens / v) for k, v in seconds.items()},
        "speedup_vs_trainer": round(seconds["transformers_trainer"] / seconds["ours_sparse_logits"], 2),
        "sparse_vs_full_logits": round(seconds["ours_full_logits"] / seconds["ours_sparse_logits"], 2),
        "fp32_matmul_peak_gflops": round(peak, 1),
        "ours_achieved_gflops": round(achieved, 1),
        "fraction_of_peak": round(achieved / peak, 3),
        "machine": {**machine("cpu"), "date": time.strftime("%Y-%m-%d")},
    }
    print(json.dumps(result, indent=2))
    if not args.quick:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
