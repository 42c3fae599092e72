"""Fine-tuning throughput on a GPU: bert-base sequence classification, our loop vs transformers.Trainer, fairly.

    .venv/bin/python benchmarks/bench_finetune_gpu.py             # bert-base, seq 128, batch 32 (a GPU):
                                                                  #   writes benchmarks/results/finetune_gpu.json
    .venv/bin/python benchmarks/bench_finetune_gpu.py --compile   # also our loop with torch.compile
    .venv/bin/python benchmarks/bench_finetune_gpu.py --only ours_compiled   # that loop alone
    .venv/bin/python benchmarks/bench_finetune_gpu.py --tiny      # CPU smoke (tiny model, seconds); writes only with --out

Same process, one GPU (``CUDA_VISIBLE_DEVICES`` pinned to the first: without a launcher Trainer would spread the
model over every GPU with DataParallel and process N× the tokens counted), the same random-init weights (one seeded
``BertForSequenceClassification``, copied into ours), the same synthetic batches (every sequence exactly ``--seq-len``
tokens, so no padding and tokens = batch × seq):

* ``ours`` — :func:`mlm_course.lab.finetune_run.fit` on the course's :class:`~mlm_course.bert.BertClassifier`
  (the lessons' loop with Accelerate): ``--precision`` (auto: bf16 on compute capability ≥ 8.0, fp16 + loss
  scaling before), TF32 on Ampere+, SDPA, fused AdamW, no host sync except at log steps (measured on the runner
  that came before it, which also built the next batches in a thread); ``ours_compiled`` the same with torch.compile (``--compile``);
* ``trainer_defaults`` — ``transformers.Trainer`` + ``BertForSequenceClassification`` with default
  ``TrainingArguments`` (fp32), batch size and steps set;
* ``trainer_same_precision`` — Trainer with our precision (``bf16=True`` or ``fp16=True``) and TF32 as ours, so
  the ratio to it measures the loop, not the number format.

``--only NAME[,NAME]`` times only the named runs (``ours_compiled`` needs no ``--compile`` then).
Throughput counts the steps after ``--warmup`` steps (compilation, allocator warm-up), timed between two host
synchronisations. Peak memory per run is measured after ``gc.collect()`` and ``empty_cache()`` (the previous run's
model is gone). FLOPs per token: :func:`mlm_course.bert.flops_per_token` with ``head_share=0`` (notebook 04's count,
6·N + 12·L·s·H, no MLM head); MFU = achieved FLOP/s ÷ the GPU's dense tensor-core peak from
:func:`mlm_course.precision.peak_tflops`, keyed on the exact device name (``--peak-tflops`` for others); none
on a CPU.
"""

from __future__ import annotations

import timing  # noqa: I001 (first: pins the GPU before torch starts CUDA)

if __name__ == "__main__":
    timing.pin_one_gpu()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification  # noqa: E402

from mlm_course import bert, finetune  # noqa: E402
from mlm_course.bert import BertClassifier  # noqa: E402
from mlm_course.lab.finetune_run import FinetuneConfig, fit  # noqa: E402
from mlm_course.precision import (  # noqa: E402
    PRECISIONS,
    autocast_dtype,
    cuda_has_bf16,
    peak_tflops,
    pick_device,
    precision_name,
)

RESULTS = Path(__file__).resolve().parent / "results" / "finetune_gpu.json"
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 256}
RUNS = ("trainer_defaults", "trainer_same_precision", "ours", "ours_compiled")


def reference(config: BertConfig) -> BertForSequenceClassification:
    """The seeded random-init model every run starts from (ours gets a copy of its weights)."""
    torch.manual_seed(0)
    return BertForSequenceClassification(config)


def synthetic(vocab: int, n: int, seq: int) -> finetune.Encoded:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, vocab, (n, seq), generator=g)
    ids[:, 0], ids[:, -1] = 101 % vocab, 102 % vocab
    return finetune.Encoded(ids.tolist(), torch.randint(2, (n,), generator=g).tolist(), [""] * n)


def our_precision(args) -> str:
    """The precision our loop runs at: bf16, fp16 or fp32."""
    return precision_name(autocast_dtype(pick_device(args.device), args.precision))


def run_ours(config: BertConfig, data: finetune.Encoded, args, compile_: bool) -> dict:
    timing.free_memory()
    torch._dynamo.reset()
    steps = args.warmup + args.steps
    settings = FinetuneConfig(epochs=1, steps=steps, batch_size=args.batch_size, lr=2e-5, warmup_ratio=0.1,
                              patience=None, log_every=args.warmup, compile=compile_, precision=args.precision,
                              device=args.device)
    model = BertClassifier.from_transformers(reference(config))
    result = fit(model, data, None, settings, pad_token_id=0, progress=False, verbose=True)
    seconds = timing.seconds_between_logged_steps(result.history, args.warmup, steps)
    run = {"seconds": seconds, "precision": result.description, "peak_memory_gib": timing.peak_memory_gib()}
    if compile_:
        run["graphs_compiled"] = int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    return run


def run_trainer(config: BertConfig, data: finetune.Encoded, args, precision: str | None) -> dict:
    """transformers.Trainer at its defaults (``precision=None``) or at ``precision`` with TF32 as ours.
    (``TrainingArguments`` starts accelerate's state afresh itself: nothing to reset here.)"""
    from transformers import Trainer, TrainingArguments

    torch.set_float32_matmul_precision("highest")  # torch's default, which TrainingArguments() leaves alone
    timing.free_memory()
    marks: dict[int, float] = {}

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            ids = torch.tensor(data.input_ids[i])
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": data.labels[i]}

    on_gpu = torch.cuda.is_available()
    options = {}
    if precision is not None:
        options = {"bf16": precision == "bf16", "fp16": precision == "fp16"}
        if on_gpu and cuda_has_bf16(pick_device(args.device)):
            options["tf32"] = True
    with tempfile.TemporaryDirectory() as tmp:
        training_args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=args.batch_size,
                                          max_steps=args.warmup + args.steps, report_to="none", save_strategy="no",
                                          logging_strategy="no", disable_tqdm=True, use_cpu=not on_gpu, **options)
        if training_args.n_gpu > 1:
            raise RuntimeError("Trainer sees several GPUs (DataParallel): run with CUDA_VISIBLE_DEVICES=0")
        Trainer(model=reference(config), args=training_args, train_dataset=Rows(),
                callbacks=[timing.step_clock(args.warmup, args.warmup + args.steps, marks)]).train()
    label = "fp32 (defaults)" if precision is None else f"{precision} autocast" + (", TF32" if "tf32" in options else "")
    return {"seconds": marks[args.warmup + args.steps] - marks[args.warmup], "precision": label,
            "peak_memory_gib": timing.peak_memory_gib()}


def _run_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in RUNS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown run(s) {unknown or [text]}: name some of {', '.join(RUNS)}")
    return names


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="CPU smoke: tiny model, seq 32, batch 8, a few steps")
    parser.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 128; tiny 32)")
    parser.add_argument("--batch-size", type=int, default=None, help="sequences per step (default 32; tiny 8)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 50; tiny 4)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 10; tiny 2)")
    parser.add_argument("--compile", action="store_true", help="also time our loop with torch.compile")
    parser.add_argument("--only", type=_run_names, default=None, metavar="NAME[,NAME]",
                        help=f"time only these runs, of {', '.join(RUNS)}")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto")
    parser.add_argument("--device", default=None)
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense peak, for MFU")
    parser.add_argument("--out", type=Path, default=None, help=f"results JSON (default {RESULTS.name} unless --tiny)")
    args = parser.parse_args(argv)
    defaults = (32, 8, 4, 2) if args.tiny else (128, 32, 50, 10)
    for name, value in zip(("seq_len", "batch_size", "steps", "warmup"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def timed_runs(args, config: BertConfig, data: finetune.Encoded, precision: str) -> dict[str, dict]:
    """The runs asked for (every one but ``ours_compiled`` unless ``--compile``; ``--only`` narrows), timed."""
    wanted = args.only or tuple(name for name in RUNS if name != "ours_compiled" or args.compile)
    timers = {"trainer_defaults": lambda: run_trainer(config, data, args, None),
              "trainer_same_precision": lambda: run_trainer(config, data, args, precision),
              "ours": lambda: run_ours(config, data, args, compile_=False),
              "ours_compiled": lambda: run_ours(config, data, args, compile_=True)}
    return {name: timers[name]() for name in RUNS if name in wanted}


def speedups(runs: dict[str, dict]) -> dict:
    """The fastest of our runs and its speed-up over each Trainer run that was timed (None where one was not)."""
    ours = [name for name in runs if name.startswith("ours")]
    best = max(ours, key=lambda name: runs[name]["tokens_per_s"]) if ours else None
    out = {"best": best}
    for trainer in ("trainer_defaults", "trainer_same_precision"):
        ratio = runs[best]["tokens_per_s"] / runs[trainer]["tokens_per_s"] if best and trainer in runs else None
        out[f"speedup_vs_{trainer}"] = None if ratio is None else round(ratio, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.tiny and not torch.cuda.is_available():
        print("no CUDA GPU here: bert-base at seq 128 would take hours on a CPU. Run with --tiny for a smoke test.")
        return 1
    transformers.utils.logging.set_verbosity_error()
    config = BertConfig(num_labels=2, max_position_embeddings=max(512, args.seq_len), **(TINY if args.tiny else {}))
    data = synthetic(config.vocab_size, args.batch_size * (args.warmup + args.steps), args.seq_len)
    tokens = args.batch_size * args.seq_len * args.steps
    per_token = bert.flops_per_token(config, args.seq_len, training=True, head_share=0.0)
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    peak, peak_note = peak_tflops(gpu, args.peak_tflops)
    precision = our_precision(args)
    runs = timed_runs(args, config, data, precision)
    for run in runs.values():
        run["tokens_per_s"] = round(tokens / run["seconds"], 1)
        run["tflops_per_s"] = round(tokens * per_token / run["seconds"] / 1e12, 4)
        run["mfu"] = round(run["tflops_per_s"] / peak, 4) if peak else None
        run["seconds"] = round(run["seconds"], 6)  # 4 decimals of a smoke run's 0.03 s would be 0.2 % off
    result = {
        "benchmark": "bert sequence classification, fine-tuning step throughput, one GPU",
        "model": "tiny (smoke)" if args.tiny else "bert-base (random init)", "seq_len": args.seq_len, "batch_size": args.batch_size,
        "timed_steps": args.steps, "warmup_steps": args.warmup, "tokens_timed": tokens, "our_precision": precision,
        "flops_per_token": per_token, "flops_formula": "mlm_course.bert.flops_per_token(head_share=0): 6·N + "
        "12·L·s·H, N = L·(4H² + 2HI) (no MLM head; embeddings are lookups)", "peak_tflops": peak,
        "peak_note": peak_note, "runs": runs, **speedups(runs),
        "hardware": {"gpu": gpu, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                     "cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                     "transformers": transformers.__version__},
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=2))
    timing.save_results(result, args.out, RESULTS, smoke=args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
