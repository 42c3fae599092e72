"""Masked-LM pretraining throughput: our loop vs transformers.Trainer, same weights, data, batches and lengths.

    python benchmarks/bench_pretraining.py                 # small config, 32 × 128, 20 timed steps each:
                                                           #   writes benchmarks/results/pretraining.json
    python benchmarks/bench_pretraining.py --out FILE      # the same, written to FILE
    python benchmarks/bench_pretraining.py --quick         # tiny sizes, seconds (CI smoke); writes only with --out

Runs, each from the same seeded initial weights (the course's :class:`~mlm_course.bert.BertMLM`, saved once and
loaded by transformers for its runs), timing ``--steps`` steps after ``--warmup`` untimed ones:

* ``ours`` — :func:`mlm_course.lab.pretrain_run.pretrain` with a :class:`~mlm_course.lab.pretrain_run.PretrainConfig`
  (the lessons' loop with Accelerate) at ``--precision`` (auto: bf16 autocast on GPUs of compute
  capability ≥ 8.0 and on CPUs whose bf16 matmul measures faster than fp32, see
  :func:`mlm_course.precision.auto_dtype`), logits only at the masked positions, fused AdamW;
* ``ours_fp32`` — the same in fp32; ``ours_full_logits`` — at our precision, the vocabulary projection everywhere;
* ``ours_bf16`` — on a CPU with bf16 instructions where auto kept fp32: what bf16 autocast would have given;
* ``trainer_defaults`` — ``transformers.Trainer`` + ``BertForMaskedLM`` + ``DataCollatorForLanguageModeling``
  with default ``TrainingArguments`` (fp32);
* ``trainer_same_precision`` — the same Trainer with our precision (``bf16=True``), so the ratio to it measures the
  loop, not the number format.

Achieved FLOP/s use :func:`mlm_course.bert.flops_per_token` (notebook 04's count; the head at the 15 % masked
positions for ours, everywhere for full logits) against the device's peak at our precision: on a CPU this machine's
matmul rate measured by :func:`mlm_course.precision.cpu_matmul_tflops` (fp32 and bf16 both reported), on a GPU
its dense tensor-core peak (:func:`mlm_course.precision.peak_tflops`). On a GPU only the first one is used
(``CUDA_VISIBLE_DEVICES`` pinned).
"""

from __future__ import annotations

import timing  # noqa: I001 (first: pins the GPU before torch starts CUDA)

if __name__ == "__main__":
    timing.pin_one_gpu()

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from transformers import BertForMaskedLM, DataCollatorForLanguageModeling, Trainer, TrainingArguments  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from mlm_course import bert, corpus, tokenization  # noqa: E402
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain  # noqa: E402
from mlm_course.models import build_model  # noqa: E402
from mlm_course.precision import (  # noqa: E402
    CPU_BF16_FLAGS,
    PRECISIONS,
    autocast_dtype,
    cpu_bf16_speedup,
    cpu_flags,
    cpu_matmul_tflops,
    machine,
    peak_tflops,
    pick_device,
    precision_name,
)
from mlm_course.pretraining import pack_blocks  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "pretraining.json"
QUICK = {"size": "tiny", "steps": 3, "warmup": 1, "batch_size": 4, "seq_len": 32}  # --quick: a smoke run in seconds
MASK_RATE = 0.15


def time_ours(args, tok, blocks, precision: str, sparse: bool) -> float:
    timing.free_memory()
    model = build_model(args.size, tok, seed=0, max_positions=args.seq_len)
    steps = args.warmup + args.steps
    config = PretrainConfig(steps=steps, batch_size=args.batch_size, seq_len=args.seq_len, lr=1e-4, warmup_steps=0,
                            eval_every=10**9, save_every=10**9, log_every=args.warmup, device=args.device,
                            precision=precision, mask_rate=MASK_RATE, sparse_logits=sparse)
    result = pretrain(model, tok, blocks, blocks[: args.batch_size], config, progress=False)
    return timing.seconds_between_logged_steps(result.history, args.warmup, steps)


def time_trainer(args, tok, blocks, precision: str | None) -> float:
    """Trainer on ``BertForMaskedLM`` with our initial weights (``TrainingArguments`` starts accelerate's state
    afresh itself: nothing to reset here)."""
    timing.free_memory()
    marks: dict[int, float] = {}
    options = {} if precision in (None, "fp32") else {"bf16": precision == "bf16", "fp16": precision == "fp16"}
    with tempfile.TemporaryDirectory() as out:
        build_model(args.size, tok, seed=0, max_positions=args.seq_len).save_pretrained(Path(out) / "model")
        model = BertForMaskedLM.from_pretrained(Path(out) / "model")
        dataset = [{"input_ids": row} for row in blocks.tolist()]
        targs = TrainingArguments(output_dir=out, per_device_train_batch_size=args.batch_size,
                                  max_steps=args.warmup + args.steps, learning_rate=1e-4, report_to=[],
                                  save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                  use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0, **options)
        trainer = Trainer(model=model, args=targs, train_dataset=dataset,
                          data_collator=DataCollatorForLanguageModeling(tok, mlm_probability=MASK_RATE),
                          callbacks=[timing.step_clock(args.warmup, args.warmup + args.steps, marks)])
        trainer.train()
    return marks[args.warmup + args.steps] - marks[args.warmup]


def achieved_gflops(config, seq_len: int, tokens: int, seconds: float, sparse: bool) -> float:
    """GFLOP/s from notebook 04's count, the MLM head at the masked share of positions when ``sparse``."""
    per_token = bert.flops_per_token(config, seq_len, head_share=MASK_RATE if sparse else 1.0)
    return per_token * tokens / seconds / 1e9


def peak_gflops(device: torch.device, precision: str) -> tuple[dict[str, float] | None, float | None]:
    """(this CPU's measured matmul rates in fp32 and bf16, or None on a GPU; the peak our precision runs against:
    that CPU rate, or the GPU's dense tensor-core peak, None where unknown), in GFLOP/s."""
    if device.type == "cpu":
        rates = {name: 1e3 * cpu_matmul_tflops(dtype) for name, dtype in
                 (("fp32", torch.float32), ("bf16", torch.bfloat16))}
        return rates, rates["bf16" if precision == "bf16" else "fp32"]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    peak = peak_tflops(gpu)[0]
    return None, peak and 1e3 * peak


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="small", help="model size (mlm_course.models.CONFIGS)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--precision", choices=PRECISIONS, default="auto", help="our loop's precision")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: the best available)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run; writes only with --out")
    parser.add_argument("--out", type=Path, default=None, help=f"results JSON (default {RESULTS.name} unless --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    return args


def timed_runs(args, tok, blocks, precision: str, device: torch.device) -> dict[str, float]:
    """Seconds of the timed steps of each run."""
    seconds = {
        "ours": time_ours(args, tok, blocks, precision, sparse=True),
        "ours_fp32": time_ours(args, tok, blocks, "fp32", sparse=True),
        "ours_full_logits": time_ours(args, tok, blocks, precision, sparse=False),
        "trainer_defaults": time_trainer(args, tok, blocks, None),
        "trainer_same_precision": time_trainer(args, tok, blocks, precision),
    }
    if device.type == "cpu" and precision == "fp32" and cpu_flags() & set(CPU_BF16_FLAGS):
        seconds["ours_bf16"] = time_ours(args, tok, blocks, "bf16", sparse=True)
    return seconds


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    hf_logging.set_verbosity_error()
    tok = tokenization.course_tokenizer()
    blocks = pack_blocks([corpus.pretraining_text("train", max_chars=2_000_000)], tok, args.seq_len)
    device = pick_device(args.device)
    precision = precision_name(autocast_dtype(device, args.precision))
    tokens = args.steps * args.batch_size * args.seq_len
    seconds = timed_runs(args, tok, blocks, precision, device)
    config = build_model(args.size, tok, max_positions=args.seq_len).config
    cpu_peaks, our_peak = peak_gflops(device, precision)
    ours_gflops = achieved_gflops(config, args.seq_len, tokens, seconds["ours"], sparse=True)
    result = {
        "config": args.size, "timed_steps": args.steps, "warmup_steps": args.warmup, "batch_size": args.batch_size,
        "seq_len": args.seq_len, "device": device.type, "our_precision": precision,
        "tokens_per_second": {k: round(tokens / v) for k, v in seconds.items()},
        "speedup_vs_trainer_defaults": round(seconds["trainer_defaults"] / seconds["ours"], 2),
        "speedup_vs_trainer_same_precision": round(seconds["trainer_same_precision"] / seconds["ours"], 2),
        "speedup_fp32_vs_trainer_defaults": round(seconds["trainer_defaults"] / seconds["ours_fp32"], 2),
        "sparse_vs_full_logits": round(seconds["ours_full_logits"] / seconds["ours"], 2),
        "cpu_matmul_peak_gflops": cpu_peaks and {k: round(v, 1) for k, v in cpu_peaks.items()},
        "cpu_bf16_speedup_probe": round(cpu_bf16_speedup(), 2) if device.type == "cpu" else None,
        "ours_achieved_gflops": round(ours_gflops, 1),
        "fraction_of_peak": round(ours_gflops / our_peak, 3) if our_peak else None,
        "flops_formula": "mlm_course.bert.flops_per_token(config, seq_len, head_share=0.15)",
        "machine": {**machine(device), "date": time.strftime("%Y-%m-%d")},
    }
    print(json.dumps(result, indent=2))
    timing.save_results(result, args.out, RESULTS, smoke=args.quick)
    return result


if __name__ == "__main__":
    main()
