"""The levers tried for the lunch-break recipe before choosing it: each a change to the recipe before it (the
shipped checkpoint's first stage, ``time_to_loss_runs.course_config``), trained for 480 CPU-seconds on one thread,
scored on the 128-token held-out set every 60. A screen, not a comparison: one run per lever, two processes side by
side on the 2-core machine (not taking turns), so read a lever as paying only if it leaves the plateau — the loss
every recipe reaches near 6.0 nats in these 8 minutes — not by a few hundredths.

    python benchmarks/bench_lunch_break_levers.py 480 seq64_b64 b16 seq32_b128 &   # one process
    python benchmarks/bench_lunch_break_levers.py 480 lr1e3 b8_lr1e3 sin_x1         # another beside it
    python benchmarks/bench_lunch_break_levers.py --collect                         # benchmarks/results/...json

``sin_xK`` initialises the learned position table with sine/cosine waves (Vaswani et al., 2017) scaled to K times
the usual standard deviation (0.02), the architecture unchanged. Each run writes ``<work>/<lever>.json`` when it
ends (``.partial.json`` while it runs); ``--collect`` gathers the finished and the partial ones.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_to_loss_runs import FULL, Recorder, Sizes, Stepper, course_config, load_data, train_in_course_loop  # noqa: E402

from mlm_course import precision  # noqa: E402
from mlm_course.lab.pretrain_run import seeded_batches  # noqa: E402
from mlm_course.lab.run_files import write_json_atomic  # noqa: E402
from mlm_course.models import build_model  # noqa: E402
from mlm_course.objective import masked_lm_loss  # noqa: E402
from mlm_course.pretraining import evaluate_masked_lm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "runs" / "lunch_break_levers"
RESULTS = ROOT / "benchmarks" / "results" / "lunch_break_levers.json"
LEVERS = {  # changes to the recipe before: shorter sequences, smaller batches, other rates, a schedule that fits
    "seq64_b64": {"seq_len": 64, "batch_size": 64, "warmup_steps": 300, "steps": 9000},
    "seq32_b128": {"seq_len": 32, "batch_size": 128, "warmup_steps": 300, "steps": 9000},
    "b16": {"batch_size": 16, "lr": 2e-3, "warmup_steps": 300, "steps": 18000},
    "b8_lr1e3": {"lr": 1e-3, "batch_size": 8, "warmup_steps": 600, "steps": 36000},
    "lr1e3": {"lr": 1e-3, "warmup_steps": 300, "steps": 9000},
    "sin_x1": {"warmup_steps": 300, "steps": 9000},
    "sin_x3": {"warmup_steps": 300, "steps": 9000},
}


def sinusoidal_positions(table: torch.Tensor, scale: float) -> None:
    """Fill a (positions, hidden) table with sine/cosine waves of standard deviation ``0.02 · scale``."""
    n, d = table.shape
    angle = torch.arange(n)[:, None].float() / 10000 ** (torch.arange(0, d, 2).float() / d)
    waves = torch.zeros(n, d)
    waves[:, 0::2], waves[:, 1::2] = torch.sin(angle), torch.cos(angle)
    with torch.no_grad():
        table.copy_(waves * (0.02 * scale / waves.std()))


def run_lever(name: str, data, sizes: Sizes, chosen: str, work: Path) -> dict:
    config = course_config(chosen, **LEVERS[name])
    blocks = data.train_blocks if config.seq_len == 128 else data.packed(config.seq_len)
    model = build_model("tiny", data.tokenizer, seed=0, max_positions=128, dropout=0.0)
    if name.startswith("sin_x"):
        sinusoidal_positions(model.get_submodule("embeddings.position").weight, float(name[len("sin_x"):]))
    recorder = Recorder(lambda m: evaluate_masked_lm(m, data.eval_batches), sizes,
                        tokens_per_step=config.batch_size * config.seq_len, targets=None,
                        partial=work / f"{name}.partial.json")
    batches = seeded_batches(blocks, data.tokenizer, config, slots=1)
    outcome = train_in_course_loop(Stepper(model, config.train_config(), batches, masked_lm_loss), recorder)
    return {"name": name, "changes": LEVERS[name], "precision": chosen, **outcome}


def collect(work: Path) -> dict:
    runs = {}
    for name in LEVERS:
        for path, finished in ((work / f"{name}.json", True), (work / f"{name}.partial.json", False)):
            if path.exists():
                runs[name] = {"finished": finished, **json.loads(path.read_text())}
                break
    return {"what": "held-out loss against training CPU-seconds for each lever, one run each, 480 CPU-s budget; "
                    "see benchmarks/bench_lunch_break_levers.py", "collected": time.strftime("%Y-%m-%d"),
            "runs": runs}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--collect"]:
        write_json_atomic(RESULTS, collect(WORK))
        return
    torch.set_num_threads(1)
    budget, names = float(argv[0]), argv[1:]
    unknown = [name for name in names if name not in LEVERS]
    if unknown:
        raise SystemExit(f"unknown levers {unknown}: choose among {', '.join(LEVERS)}")
    sizes = Sizes(budget_seconds=budget, early_every=60, early_until=60, every=60)
    data = load_data(FULL)
    chosen = precision.precision_name(precision.auto_dtype(torch.device("cpu")))
    WORK.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (WORK / f"{name}.json").exists():
            write_json_atomic(WORK / f"{name}.json", run_lever(name, data, sizes, chosen, WORK))


if __name__ == "__main__":
    main(sys.argv[1:])
