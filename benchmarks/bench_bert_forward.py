"""Forward-pass speed on the CPU: mlm_course.bert.BertMLM vs transformers' BertForMaskedLM on the same weights.

    .venv/bin/python benchmarks/bench_bert_forward.py           # full: writes benchmarks/results/bert_forward.json
    .venv/bin/python benchmarks/bench_bert_forward.py --quick   # smoke (course checkpoint only); writes only with --out

For each model size, in the same run and on the same padded batch (a quarter of the rows padded to half length):
ours (``BertMLM.from_pretrained``, SDPA attention), transformers with its default attention (SDPA) and transformers
with eager attention (``from_pretrained(..., attn_implementation="eager")``), all three loaded from the same
transformers folder (the course checkpoint, or a seeded random ``BertForMaskedLM`` of the size saved to a temporary
folder); fp32, eval mode, no gradients, one torch thread. Times are medians of the repeats, the candidates timed in
turn each round so a busy machine slows all alike; ``ratio_ours_over_*`` > 1 means ours is slower. The largest logit
differences compare ours (SDPA) with transformers' SDPA, and ours with eager attention (not timed) with
transformers' eager: the same arithmetic.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import timing  # benchmarks/timing.py (run as a script, this folder is on sys.path)
import torch
import transformers
from transformers import BertConfig, BertForMaskedLM

from mlm_course import models, precision
from mlm_course.bert import BertMLM

RESULTS = Path(__file__).resolve().parent / "results" / "bert_forward.json"


def checkpoint(size: str, scratch: Path) -> Path:
    """The folder every candidate loads: the course checkpoint, or a seeded random ``BertForMaskedLM`` of ``size``
    (bert-base's vocabulary for ``base``, the course's 8,192 otherwise) saved in ``scratch``."""
    if size == "course":
        return Path(models.resolve("course"))
    overrides = {"vocab_size": 30522, "max_position_embeddings": 512} if size == "base" else {"vocab_size": 8192}
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(**models.CONFIGS[size], **overrides)).save_pretrained(scratch)
    return scratch


def bench_size(size: str, batch: int, length: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        folder = checkpoint(size, Path(scratch))
        reference = BertForMaskedLM.from_pretrained(folder, attn_implementation="sdpa").eval()
        eager = BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
        ours = BertMLM.from_pretrained(folder, attention="sdpa").eval()
        ours_eager = BertMLM.from_pretrained(folder, attention="eager").eval()  # for the difference only
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, reference.config.vocab_size, (batch, length), generator=g)
    mask = torch.ones_like(ids)
    mask[: batch // 4, length // 2:] = 0
    with torch.no_grad():
        difference = {name: float((mine(ids, mask) - theirs(input_ids=ids, attention_mask=mask).logits).abs().max())
                      for name, mine, theirs in (("sdpa", ours, reference), ("eager", ours_eager, eager))}

        def run(model, hf=True):
            return lambda: model(input_ids=ids, attention_mask=mask) if hf else model(ids, mask)

        seconds = timing.round_robin_medians({"ours": run(ours, hf=False), "transformers_sdpa": run(reference),
                                       "transformers_eager": run(eager)}, repeats)
    return {
        "batch": [batch, length], "parameters": sum(p.numel() for p in ours.parameters()),
        "seconds": seconds,
        "tokens_per_second": {name: batch * length / s for name, s in seconds.items()},
        "ratio_ours_over_sdpa": seconds["ours"] / seconds["transformers_sdpa"],
        "ratio_ours_over_eager": seconds["ours"] / seconds["transformers_eager"],
        "max_abs_logit_difference_vs_sdpa": difference["sdpa"],
        "max_abs_logit_difference_vs_eager": difference["eager"],  # ours with eager attention: the same arithmetic
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="course checkpoint only, 2 repeats")
    parser.add_argument("--out", type=Path, default=None, help=f"where to write the JSON (full mode: {RESULTS})")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    plan = [("course", 32, 128, 2)] if args.quick else [("course", 32, 128, 7), ("small", 32, 128, 5),
                                                         ("base", 8, 128, 3)]
    results = {
        "task": "forward pass, fp32, no gradients, eval mode; same weights and padded batch for every candidate",
        "sizes": {size: bench_size(size, batch, length, repeats) for size, batch, length, repeats in plan},
        "machine": {**precision.machine(torch.device("cpu")), "load_average_1min": os.getloadavg()[0]},
        "transformers": transformers.__version__,
    }
    timing.save_results(results, args.out, RESULTS, smoke=args.quick)
    for size, r in results["sizes"].items():
        print(f"{size:>6}: ours {r['seconds']['ours'] * 1e3:7.1f} ms, transformers SDPA "
              f"{r['seconds']['transformers_sdpa'] * 1e3:7.1f} ms, eager {r['seconds']['transformers_eager'] * 1e3:7.1f}"
              f" ms → ours / SDPA = {r['ratio_ours_over_sdpa']:.2f}, ours / eager = {r['ratio_ours_over_eager']:.2f}")
    return results


if __name__ == "__main__":
    main()
