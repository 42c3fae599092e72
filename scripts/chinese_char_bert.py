"""Pretrain the course's character-level Chinese BERT and ship it (called by ``build_chinese_assets.py --model``).

    .venv/bin/python scripts/chinese_char_bert.py                 # train (one thread, fp32) and ship
    .venv/bin/python scripts/chinese_char_bert.py --steps 30      # time a few steps into runs/, ship nothing
    .venv/bin/python scripts/chinese_char_bert.py --results-only  # recompute results.json and README.md

The tiny BERT of ``models.CONFIGS`` (2 layers, hidden 128) on the shipped character tokenizer, with the course's
recipe (no dropout, output logits only at masked positions, 15 % dynamic masks, 80/10/10, 10 % short sequences so
that single lines look familiar), trained by ``lab.pretrain_run.pretrain`` on the **train** poems packed into
32-token blocks, 64 to a batch; held-out figures on the held-out poems with frozen masks. Writes into the model folder: the
weights, ``metrics.jsonl`` (the learning curve), ``results.json`` (command, settings, time, held-out loss and the
unigram baseline's, and the one-character-at-a-time comparison with the bigram baseline) and ``README.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from mlm_course import chinese, corpus, models, pretraining  # noqa: E402
from mlm_course.lab.precision import machine  # noqa: E402
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain  # noqa: E402

RUN_DIR = ROOT / "runs" / "chinese-char-bert"
SEQ_LEN = 32
SETTINGS = {"steps": 9000, "lr": 3e-3, "warmup_ratio": 0.1, "batch_size": 64, "dropout": 0.0, "seq_len": SEQ_LEN,
            "short_seq_prob": 0.1, "eval_every": 500, "save_every": 1000, "log_every": 50, "precision": "fp32",
            "device": "cpu", "seed": 0}
COMMAND = "python scripts/build_chinese_assets.py --model"


def blocks(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(training, held-out) blocks of ``SEQ_LEN`` tokens, poems packed back to back."""
    train = [poem.text for poem in corpus.chinese_poems("train")]
    heldout = [poem.text for poem in corpus.chinese_poems("heldout")]
    return pretraining.pack_blocks(train, tokenizer, SEQ_LEN), pretraining.pack_blocks(heldout, tokenizer, SEQ_LEN)


def train(steps: int, out: Path, data: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.nn.Module, dict]:
    """Pretrain from seed 0 for ``steps`` steps on ``data`` (:func:`blocks`) into ``out``; returns the model and the
    run's record."""
    torch.set_num_threads(1)
    tokenizer = chinese.char_tokenizer()
    train_blocks, eval_blocks = data
    config = PretrainConfig(**{**SETTINGS, "steps": steps})
    model = models.build_model("tiny", tokenizer, seed=config.seed, max_length=SEQ_LEN, dropout=0.0)
    if out.exists():
        shutil.rmtree(out)
    cpu, wall = time.process_time(), time.perf_counter()
    result = pretrain(model, tokenizer, train_blocks, eval_blocks, config, out_dir=out, progress=False)
    record = {"command": COMMAND, "steps": result.steps_done, "seconds": round(time.perf_counter() - wall, 1),
              "cpu_seconds": round(time.process_time() - cpu, 1),
              "tokens_seen": result.steps_done * config.batch_size * SEQ_LEN,
              "training_blocks": len(train_blocks), "heldout_blocks": len(eval_blocks), "vocab_size": len(tokenizer),
              "settings": asdict(config) | {"betas": list(config.betas), "mask_mix": list(config.mask_mix)},
              "machine": machine(torch.device("cpu"))}
    return model.eval(), record


def results(model: torch.nn.Module, record: dict, data: tuple[torch.Tensor, torch.Tensor]) -> dict:
    """``record`` plus the held-out scores (frozen masks on ``data``'s held-out blocks) next to the unigram
    baseline's, and the comparison with the bigram baseline on every character of the held-out lines, masked one
    at a time."""
    tokenizer = chinese.char_tokenizer()
    train_blocks, eval_blocks = data
    frozen = pretraining.frozen_eval_batches(eval_blocks, tokenizer)
    heldout = pretraining.evaluate_masked_lm(model, frozen)
    unigram = pretraining.unigram_baseline(train_blocks, frozen, len(tokenizer), tokenizer.all_special_ids)
    comparison = chinese.compare_with_bigram(model, tokenizer, chinese.heldout_lines(), chinese.training_bigrams())
    return {**record, "parameters": models.count_parameters(model), "heldout": heldout, "unigram_baseline": unigram,
            "one_at_a_time": comparison}


def model_card(summary: dict) -> str:
    """README.md of the shipped folder, from ``results.json``."""
    s, h, u, c = summary["settings"], summary["heldout"], summary["unigram_baseline"], summary["one_at_a_time"]
    return f"""# chinese-char-bert: a character-level BERT pretrained on classical Chinese poems

The course's `mlm_course.bert.BertMLM`, tiny size (2 layers, hidden 128, 2 heads, {summary['parameters']['total']:,}
parameters), with a character vocabulary of {summary["vocab_size"]:,} entries (the five BERT specials, then every
character seen at least twice in the training text). Load it with `mlm_course.models.load_mlm(folder)` or
`AutoModelForMaskedLM` / `AutoTokenizer` on this folder.

## How it was made
```
{summary['command']}
```
{summary['steps']:,} steps × batch {s['batch_size']} × {s['seq_len']} characters = {summary['tokens_seen']:,} tokens, peak
learning rate {s['lr']:g} after {s['warmup_ratio']:.0%} warm-up, then linear decay; AdamW (betas {tuple(s['betas'])},
weight decay {s['weight_decay']}), clipping at {s['max_grad_norm']}, no dropout, fp32, one CPU thread; dynamic masks
(15 %, 80 / 10 / 10), {s['short_seq_prob']:.0%} of the sequences cut short, logits only at masked positions;
{summary['cpu_seconds'] / 60:.1f} CPU-minutes ({summary['machine']['platform']}, torch {summary['machine']['torch']}).
Training text: the train split of `mlm_course/data/chinese/` ({summary['training_blocks']:,} blocks of {s['seq_len']} tokens).

## Held-out results
Frozen masks over the {summary['heldout_blocks']} blocks of the held-out poems ({h['tokens']} masked characters):
loss {h['loss']:.3f} nats (unigram frequencies {u['loss']:.3f}), top-1 {h['top1']:.1%} (unigram {u['top1']:.1%}; both
figures count the punctuation marks, about one position in six, among the masked characters).
Every character of the held-out lines masked alone ({c['positions']:,} positions): top-1 {c['bert']['top1']:.1%},
top-5 {c['bert']['top5']:.1%}; the character bigram baseline on the same positions {c['bigram']['top1']:.1%} /
{c['bigram']['top5']:.1%} (exact McNemar on top-1: p = {c['mcnemar']['p']:.2g}).

## Licence
The training text is public domain (poems of the Tang and Song dynasties; see DATA.md for the packages it was taken
from). The weights and the vocabulary are released under the course's Apache-2.0 licence.
"""


def ship(model: torch.nn.Module, record: dict, folder: Path, data: tuple[torch.Tensor, torch.Tensor],
         run_dir: Path | None = RUN_DIR) -> dict:
    """Write the model, the learning curve of ``run_dir`` (None: keep the shipped one), results.json and README.md
    (scored on ``data``, :func:`blocks`) into ``folder`` (the tokenizer is there)."""
    model.save_pretrained(folder)
    if run_dir is not None:
        shutil.copy(run_dir / "metrics.jsonl", folder / "metrics.jsonl")
    summary = results(model, record, data)
    (folder / "results.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(model_card(summary), encoding="utf-8")
    return summary


def train_and_ship(folder: Path) -> dict:
    data = blocks(chinese.char_tokenizer())
    model, record = train(SETTINGS["steps"], RUN_DIR, data)
    return ship(model, record, folder, data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="a timing run of this many steps (nothing shipped)")
    parser.add_argument("--results-only", action="store_true", help="rewrite results.json and README.md")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps {args.steps}: a timing run needs at least 1 step")
    folder = corpus.chinese_model_dir()
    if args.results_only:
        record = json.loads((folder / "results.json").read_text())
        model, _ = models.load_mlm(str(folder))
        keep = {key: record[key] for key in ("command", "steps", "seconds", "cpu_seconds", "tokens_seen",
                                             "training_blocks", "heldout_blocks", "vocab_size", "settings", "machine")}
        ship(model, keep, folder, blocks(chinese.char_tokenizer()), run_dir=None)
    elif args.steps is not None:
        _, record = train(args.steps, ROOT / "runs" / "chinese-char-bert-timing", blocks(chinese.char_tokenizer()))
        print(json.dumps({key: record[key] for key in ("steps", "seconds", "cpu_seconds")}))
    else:
        print(json.dumps(train_and_ship(folder)["heldout"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
