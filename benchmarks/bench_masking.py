"""Masking 10,000 × 128 token ids: mlm_course.masking vs transformers' DataCollatorForLanguageModeling vs a
per-token Python loop.

    .venv/bin/python benchmarks/bench_masking.py            # full: writes benchmarks/results/masking.json
    .venv/bin/python benchmarks/bench_masking.py --quick    # CI smoke (1,000 rows); writes only with --out

Compared, in the same run, on the same ids ([CLS] + random non-special bert-base-uncased ids + [SEP], no padding):

* masking only — ``mask_tokens`` on the tensor (Bernoulli and fixed-count) vs the transformers collator's
  ``torch_mask_tokens`` given the tensor and a precomputed ``special_tokens_mask``;
* end to end — a list of ``{"input_ids": list}`` examples through ``MLMCollator`` vs through
  ``DataCollatorForLanguageModeling`` (padding, special-token detection, masking);
* per-token Python loops — a naive Bernoulli loop over Python lists (the fastest a Python loop gets), the same
  loop indexing a tensor element by element (what naive tensor code does), and the line-by-line port of the
  original BERT code (fixed count); each timed on a subset of rows and extrapolated per token to the full batch.

Times are the median of a few repeats (the vectorised candidates timed in turn, round by round); the ratios are (their time) / (our time), so > 1 means ours is faster.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import timing  # benchmarks/timing.py (run as a script, this folder is on sys.path)
import torch
import transformers
from transformers import DataCollatorForLanguageModeling

from mlm_course import mask_checks, masking
from mlm_course.collator import MLMCollator
from mlm_course.tokenization import bert_tokenizer

RESULTS = Path(__file__).resolve().parent / "results" / "masking.json"


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def loop_over_tensor(ids: torch.Tensor, special: set[int], mask_id: int, vocab: int, g: torch.Generator):
    """The naive way on tensors: index every element, one torch.rand per token."""
    out, labels = ids.clone(), torch.full_like(ids, masking.IGNORE_INDEX)
    for b in range(ids.shape[0]):
        for i in range(ids.shape[1]):
            tok = int(ids[b, i])
            if tok in special or float(torch.rand(1, generator=g)) >= 0.15:
                continue
            labels[b, i] = tok
            u = float(torch.rand(1, generator=g))
            if u < 0.8:
                out[b, i] = mask_id
            elif u < 0.9:
                out[b, i] = int(torch.randint(vocab, (1,), generator=g))
    return out, labels


def loop_bernoulli(rows: list[list[int]], special: set[int], mask_id: int, vocab: int, rng: random.Random):
    """The naive way: a Python loop over every token."""
    out_ids, out_labels = [], []
    for row in rows:
        ids, labels = list(row), [masking.IGNORE_INDEX] * len(row)
        for i, tok in enumerate(row):
            if tok in special or rng.random() >= 0.15:
                continue
            labels[i] = tok
            u = rng.random()
            if u < 0.8:
                ids[i] = mask_id
            elif u < 0.9:
                ids[i] = rng.randrange(vocab)
        out_ids.append(ids)
        out_labels.append(labels)
    return out_ids, out_labels


SEQ_LEN = 128


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 rows, 3 repeats: a smoke test for CI")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help=f"JSON output (full run default: {RESULTS})")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a shared 2-core machine, 2 threads stall on each other; "
                        "0 = torch's default)")
    args = parser.parse_args(argv)
    args.rows = args.rows or (1_000 if args.quick else 10_000)
    args.repeats = 3 if args.quick else 7
    args.loop_rows = 20 if args.quick else 300
    args.tensor_rows = max(2, args.loop_rows // 10)  # the loop over a tensor is slower still
    return args


def token_ids(tok, rows: int) -> torch.Tensor:
    """``rows`` × 128 ids: [CLS], random non-special ids, [SEP]; no padding."""
    g = torch.Generator().manual_seed(0)
    body = torch.randint(999, len(tok), (rows, SEQ_LEN - 2), generator=g)
    return torch.cat([torch.full((rows, 1), tok.cls_token_id), body, torch.full((rows, 1), tok.sep_token_id)], 1)


def vectorised_seconds(tok, ids: torch.Tensor, repeats: int) -> dict[str, float]:
    """Median seconds of ours and transformers' masking, on the tensor and end to end, timed round by round."""
    g = torch.Generator().manual_seed(0)
    special_mask = torch.isin(ids, torch.tensor(tok.all_special_ids)).long()
    examples = [{"input_ids": r} for r in ids.tolist()]
    tokens = masking.TokenIds.of(tok)
    bernoulli = masking.MaskSpec()
    fixed = masking.MaskSpec(mask_scheme="fixed")
    theirs = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=0)
    theirs([examples[0]])  # creates its generator
    ours = MLMCollator(tok, seed=0)
    candidates = {
        "ours_bernoulli": lambda: masking.mask_tokens(ids, bernoulli, tokens, generator=g),
        "ours_fixed": lambda: masking.mask_tokens(ids, fixed, tokens, generator=g),
        "transformers_mask_tokens": lambda: theirs.torch_mask_tokens(ids.clone(), special_tokens_mask=special_mask),
        "ours_collator_end_to_end": lambda: ours(examples),
        "transformers_collator_end_to_end": lambda: theirs(examples),
    }
    return timing.round_robin_medians(candidates, repeats)


def python_loop_seconds(tok, ids: torch.Tensor, loop_rows: int, tensor_rows: int) -> dict[str, float]:
    """The per-token Python loops, each timed on a few rows and extrapolated per token to all of ``ids``."""
    specials = set(tok.all_special_ids)
    subset = ids[:loop_rows].tolist()
    rng = random.Random(0)
    g = torch.Generator().manual_seed(0)
    vocab_ids = list(range(len(tok)))

    def original_port():
        for row in subset:
            mask_checks.reference_original_masking(
                row, vocab_words=vocab_ids, rng=rng, special={tok.cls_token_id, tok.sep_token_id},
                is_continuation=lambda _t: False, mask_token=tok.mask_token_id, max_predictions_per_seq=20,
            )

    per_token = {
        "python_loop_bernoulli_extrapolated": median_seconds(
            lambda: loop_bernoulli(subset, specials, tok.mask_token_id, len(tok), rng), 3) / (SEQ_LEN * loop_rows),
        "python_loop_over_tensor_extrapolated": median_seconds(
            lambda: loop_over_tensor(ids[:tensor_rows], specials, tok.mask_token_id, len(tok), g), 3)
        / (SEQ_LEN * tensor_rows),
        "python_loop_original_fixed_extrapolated": median_seconds(original_port, 3) / (SEQ_LEN * loop_rows),
    }
    return {name: seconds * ids.numel() for name, seconds in per_token.items()}


def speedups(t: dict[str, float]) -> dict[str, float]:
    """(their time) / (our time) for each comparison: > 1 means ours is faster."""
    return {
        "bernoulli_vs_transformers_mask_tokens": t["transformers_mask_tokens"] / t["ours_bernoulli"],
        "fixed_vs_transformers_mask_tokens": t["transformers_mask_tokens"] / t["ours_fixed"],
        "collator_vs_transformers_collator": t["transformers_collator_end_to_end"] / t["ours_collator_end_to_end"],
        "bernoulli_vs_python_loop_on_lists": t["python_loop_bernoulli_extrapolated"] / t["ours_bernoulli"],
        "bernoulli_vs_python_loop_on_tensor": t["python_loop_over_tensor_extrapolated"] / t["ours_bernoulli"],
        "fixed_vs_original_python_loop": t["python_loop_original_fixed_extrapolated"] / t["ours_fixed"],
    }


def machine() -> dict:
    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tok = bert_tokenizer()
    ids = token_ids(tok, args.rows)
    t = vectorised_seconds(tok, ids, args.repeats) | python_loop_seconds(tok, ids, args.loop_rows, args.tensor_rows)
    result = {
        "task": f"mask {args.rows:,} x {SEQ_LEN} token ids (15 %, 80/10/10)",
        "repeats": args.repeats,
        "python_loops": f"timed on {args.loop_rows} rows ({args.tensor_rows} for the tensor loop), extrapolated per token "
        f"to {args.rows:,} rows",
        "seconds": t,
        "speedup_ours_over_theirs": speedups(t),
        "machine": machine(),
    }
    print(f"{result['task']}; median of {args.repeats}; loops {result['python_loops']}")
    for name, seconds in t.items():
        print(f"  {name:42s} {seconds * 1000:10.1f} ms")
    for name, ratio in result["speedup_ours_over_theirs"].items():
        print(f"  speed-up {name:42s} {ratio:8.1f}x")
    out = timing.save_results(result, args.out, RESULTS, smoke=args.quick)
    if out is not None:
        print(f"written to {out}")
    return result

if __name__ == "__main__":
    main()
