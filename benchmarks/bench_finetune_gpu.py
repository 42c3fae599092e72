"""Fine-tuning throughput on a GPU: bert-base sequence classification, our loop vs transformers.Trainer's defaults.

    .venv/bin/python benchmarks/bench_finetune_gpu.py             # bert-base, seq 128, batch 32 (a GPU):
                                                                  #   writes benchmarks/results/finetune_gpu.json
    .venv/bin/python benchmarks/bench_finetune_gpu.py --compile   # also our loop with torch.compile
    .venv/bin/python benchmarks/bench_finetune_gpu.py --tiny      # CPU smoke (tiny model, seconds); writes only with --out

Same process, same random-init model (seeded), same synthetic batches (every sequence exactly ``--seq`` tokens, so
no padding and tokens = batch × seq):

* ``ours`` — :func:`mlm_course.finetune.fit`: Accelerate, bf16 autocast where supported (fp16 + loss scaling
  otherwise), TF32 on Ampere+, SDPA attention, fused AdamW, no host sync except at log steps;
* ``trainer`` — ``transformers.Trainer`` with default ``TrainingArguments`` (fp32, TF32 as torch's default), only the
  batch size and step count set.

Throughput counts the steps after ``--warmup`` steps (compilation, allocator warm-up), timed between two host
synchronisations. FLOPs per token = 6·N + 12·L·s·d: N = weights used in matmuls (encoder layers, pooler,
classifier; embedding lookups excluded), 6 = forward (2) + backward (4) per weight; 12·L·s·d = attention scores and
weighted values (QKᵀ and AV, 2·2·s·d per token and layer forward, ×3 with backward). MFU = achieved FLOP/s ÷ the
GPU's dense bf16 peak (H100/H200 SXM: 989 TFLOP/s; ``--peak-tflops`` for other GPUs); none on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification

from mlm_course import finetune

RESULTS = Path(__file__).resolve().parent / "results" / "finetune_gpu.json"
#: Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), by a substring of torch.cuda.get_device_name().
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100 80GB HBM3": 989.0, "H100 SXM": 989.0, "H100 PCIe": 756.0, "H100": 989.0,
                    "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10G": 70.0}
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 256}


def peak_tflops(explicit: float | None) -> tuple[float | None, str]:
    if explicit:
        return explicit, "given with --peak-tflops"
    if not torch.cuda.is_available():
        return None, "no GPU: MFU is not reported"
    name = torch.cuda.get_device_name()
    for key, value in PEAK_BF16_TFLOPS.items():
        if key in name:
            return value, f"dense bf16 peak of {key} ({value:g} TFLOP/s)"
    return None, f"unknown GPU {name!r}: pass --peak-tflops for MFU"


def matmul_parameters(model: BertForSequenceClassification) -> int:
    """Weights that take part in matmuls: everything but the embedding tables (lookups) and norms/biases' adds."""
    return sum(p.numel() for n, p in model.named_parameters() if "embeddings" not in n)


def flops_per_token(model: BertForSequenceClassification, seq: int) -> float:
    c = model.config
    return 6 * matmul_parameters(model) + 12 * c.num_hidden_layers * seq * c.hidden_size


def build(config: BertConfig) -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(config)


def synthetic(vocab: int, n: int, seq: int) -> finetune.Encoded:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, vocab, (n, seq), generator=g)
    ids[:, 0], ids[:, -1] = 101 % vocab, 102 % vocab
    return finetune.Encoded(ids.tolist(), torch.randint(2, (n,), generator=g).tolist(), [""] * n)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_ours(config: BertConfig, data: finetune.Encoded, args, compile_: bool) -> dict:
    model = build(config)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    steps = args.warmup + args.steps
    ft_config = finetune.FinetuneConfig(epochs=1, max_steps=steps, batch_size=args.batch, lr=2e-5, warmup=0.1,
                                        patience=None, log_every=args.warmup, compile=compile_,
                                        precision=args.precision, device=args.device)
    result = finetune.fit(model, data, None, ft_config, pad_token_id=0, progress=False, verbose=True)
    times = {m["step"]: m["seconds"] for m in result.metrics if m["split"] == "train"}
    if args.warmup not in times or steps not in times:
        raise RuntimeError(f"our loop logged steps {sorted(times)}; expected {args.warmup} and {steps}")
    seconds = times[steps] - times[args.warmup]  # both rows follow a host sync (the logged loss is read)
    return {"seconds": seconds, "precision": result.description, "peak_memory_gib": peak_memory()}


def run_trainer(config: BertConfig, data: finetune.Encoded, args) -> dict:
    from accelerate.state import AcceleratorState
    from transformers import Trainer, TrainerCallback, TrainingArguments

    AcceleratorState._reset_state()  # Trainer builds its own Accelerator (fp32)
    torch.set_float32_matmul_precision("highest")  # torch's default, which TrainingArguments() leaves alone
    model = build(config)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    marks: dict[int, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, _args, state, control, **kwargs):
            if state.global_step in (args.warmup, args.warmup + args.steps):
                sync()
                marks[state.global_step] = time.perf_counter()

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            ids = torch.tensor(data.input_ids[i])
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": data.labels[i]}

    with tempfile.TemporaryDirectory() as tmp:
        training_args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=args.batch,
                                          max_steps=args.warmup + args.steps, report_to="none", save_strategy="no",
                                          logging_strategy="no", disable_tqdm=True,
                                          use_cpu=not torch.cuda.is_available())
        Trainer(model=model, args=training_args, train_dataset=Rows(), callbacks=[Clock()]).train()
    return {"seconds": marks[args.warmup + args.steps] - marks[args.warmup], "precision": "fp32 (defaults)",
            "peak_memory_gib": peak_memory()}


def peak_memory() -> float | None:
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="CPU smoke: tiny model, seq 32, batch 8, a few steps")
    parser.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 128; tiny 32)")
    parser.add_argument("--batch", type=int, default=None, help="sequences per step (default 32; tiny 8)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 50; tiny 4)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 10; tiny 2)")
    parser.add_argument("--compile", action="store_true", help="also time our loop with torch.compile")
    parser.add_argument("--precision", choices=finetune.PRECISIONS, default="auto")
    parser.add_argument("--device", default=None)
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak, for MFU")
    parser.add_argument("--out", type=Path, default=None, help=f"results JSON (default {RESULTS.name} unless --tiny)")
    args = parser.parse_args(argv)
    defaults = (32, 8, 4, 2) if args.tiny else (128, 32, 50, 10)
    for name, value in zip(("seq", "batch", "steps", "warmup"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    if not args.tiny and not torch.cuda.is_available():
        print("no CUDA GPU here: bert-base at seq 128 would take hours on a CPU. Run with --tiny for a smoke test.")
        return 1
    transformers.utils.logging.set_verbosity_error()
    config = BertConfig(num_labels=2, max_position_embeddings=max(512, args.seq), **(TINY if args.tiny else {}))
    data = synthetic(config.vocab_size, args.batch * (args.warmup + args.steps), args.seq)
    tokens = args.batch * args.seq * args.steps
    per_token = flops_per_token(build(config), args.seq)
    peak, peak_note = peak_tflops(args.peak_tflops)
    runs = {"trainer": run_trainer(config, data, args), "ours": run_ours(config, data, args, compile_=False)}
    if args.compile:
        runs["ours_compiled"] = run_ours(config, data, args, compile_=True)
    for run in runs.values():
        run["tokens_per_s"] = round(tokens / run["seconds"], 1)
        run["tflops_per_s"] = round(tokens * per_token / run["seconds"] / 1e12, 3)
        run["mfu"] = round(run["tflops_per_s"] / peak, 4) if peak else None
        run["seconds"] = round(run["seconds"], 4)
    best = max((k for k in runs if k != "trainer"), key=lambda k: runs[k]["tokens_per_s"])
    result = {
        "benchmark": "bert sequence classification, fine-tuning step throughput",
        "model": "tiny (smoke)" if args.tiny else "bert-base (random init)", "seq": args.seq, "batch": args.batch,
        "timed_steps": args.steps, "warmup_steps": args.warmup, "tokens_timed": tokens,
        "flops_per_token": per_token, "flops_formula": "6·N + 12·L·s·d (N = matmul weights, embeddings excluded)",
        "matmul_parameters": matmul_parameters(build(config)), "peak_tflops": peak, "peak_note": peak_note,
        "runs": runs, "speedup_vs_trainer": round(runs[best]["tokens_per_s"] / runs["trainer"]["tokens_per_s"], 2),
        "best": best,
        "hardware": {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                     "cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                     "transformers": transformers.__version__},
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=2))
    out = args.out or (None if args.tiny else RESULTS)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
