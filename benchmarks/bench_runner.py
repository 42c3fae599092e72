"""What the runner's prefetching loader buys on this CPU: the next step's batches (blocks cut short, masked) built in
a background thread while the current step computes, against building them in the step's own thread.

    .venv/bin/python benchmarks/bench_runner.py            # writes benchmarks/results/runner.json
    .venv/bin/python benchmarks/bench_runner.py --quick    # a smoke run (seconds); writes only with --out

The course recipe's pretraining (tiny model, batch 32 × 128, 10 % short sequences, fp32), the same steps with and
without prefetching, timed in turns (:func:`timing.round_robin_medians`) so a busy machine slows both alike. On a GPU
the thread also pins the batches for a copy that does not wait; on a CPU the gain is what the overlap of host work
(masking, ~5 % of a tiny model's step) with the step's own threads is worth, and can be negative when torch already
uses every core.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import timing  # benchmarks/timing.py (run as a script, this folder is on sys.path)
import torch

from mlm_course import corpus, models, tokenization
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain
from mlm_course.precision import machine
from mlm_course.pretraining import pack_blocks

RESULTS = Path(__file__).resolve().parent / "results" / "runner.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few steps of a small slice (smoke run)")
    parser.add_argument("--out", type=Path, default=None, help=f"results JSON (default {RESULTS}, not with --quick)")
    args = parser.parse_args(argv)
    steps, repeats, chars = (4, 1, 200_000) if args.quick else (30, 3, 2_000_000)
    tok = tokenization.course_tokenizer()
    blocks = pack_blocks([corpus.pretraining_text("train", max_chars=chars)], tok, 128)

    def run(prefetch: bool):
        config = PretrainConfig(steps=steps, batch_size=32, lr=1e-3, warmup_steps=0, short_seq_prob=0.1, dropout=0.0,
                                eval_every=10**6, save_every=10**6, precision="fp32", device="cpu", prefetch=prefetch)
        return lambda: pretrain(models.build_model("tiny", tok, max_length=128, dropout=0.0), tok, blocks,
                                blocks[:32], config, progress=False)

    seconds = timing.round_robin_medians({"in_the_step": run(False), "prefetched": run(True)}, repeats)
    document = {
        "what": "pretraining steps of the course recipe (tiny, 32 x 128, 10 % short sequences, fp32), with and "
                "without building the next step's batches in a background thread",
        "steps_per_run": steps, "median_seconds": seconds,
        "seconds_per_step": {name: round(value / steps, 4) for name, value in seconds.items()},
        "speedup_of_prefetching": round(seconds["in_the_step"] / seconds["prefetched"], 3),
        "torch_threads": torch.get_num_threads(), "machine": {**machine(torch.device("cpu")),
                                                            "date": time.strftime("%Y-%m-%d")},
    }
    print(json.dumps(document, indent=2))
    timing.save_results(document, args.out, RESULTS, smoke=args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
