"""Pretrain the course's character-level Chinese BERT and ship it (called by ``build_chinese_assets.py --model``).

    .venv/bin/python scripts/chinese_char_bert.py                 # train both stages (one thread, fp32) and ship
    .venv/bin/python scripts/chinese_char_bert.py --steps 30      # time a few steps into runs/, ship nothing
    .venv/bin/python scripts/chinese_char_bert.py --results-only  # recompute results.json and README.md
    .venv/bin/python scripts/chinese_char_bert.py --whole-word    # the same recipe with jieba whole-word masks
    .venv/bin/python scripts/chinese_char_bert.py --whole-word --resume  # … continuing a killed run

The tiny BERT of ``models.CONFIGS`` (2 layers, hidden 128) on the shipped character tokenizer, with the course's
recipe (no dropout, output logits only at masked positions, 15 % dynamic masks, 80/10/10, 10 % short sequences so
that single lines look familiar), trained by ``lab.pretrain_run.pretrain`` on the **train** poems packed into
32-token blocks, 64 to a batch, in the two stages of ``STAGES`` (9,000 steps from random weights, then 12,000 more
from those weights at half the peak learning rate, seed 1), each into its own folder under runs/; held-out figures on
the held-out poems with frozen masks. Writes into the model folder: the weights, ``metrics.jsonl`` (the learning
curves of the stages joined, steps counted from the start of stage 1), ``results.json`` (command, settings, each
stage's record and the totals, held-out loss and the unigram baseline's, and the one-character-at-a-time comparison
with the bigram baseline) and ``README.md``.

``--whole-word`` trains the same model with the same recipe, seeds, data and steps, differing only in the masks:
jieba words (:func:`mlm_course.chinese.pack_word_starts`) selected whole, 15 % of the words, each word's characters
replaced 80 / 10 / 10 (:mod:`mlm_course.whole_word`). Its stages go to their own folders under runs/ (the weights of
each finished stage in ``final/``), and ``notebooks/results/chinese_whole_word.json`` receives its record and the
paired comparison with the shipped character-masked model on the held-out lines: every character masked alone, and
every multi-character jieba word masked whole (:func:`mlm_course.chinese.compare_models`). ``--resume`` continues a
killed run: finished stages are loaded, the running one continues from its latest checkpoint.
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
from mlm_course.bert import BertMLM  # noqa: E402
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain  # noqa: E402
from mlm_course.lab.run_files import write_json_atomic  # noqa: E402
from mlm_course.lab.training_run import CHECKPOINT_POINTER  # noqa: E402
from mlm_course.precision import machine  # noqa: E402
from mlm_course.stored import read_metrics  # noqa: E402

RUNS = ROOT / "runs"
SEQ_LEN = 32
SETTINGS = {"steps": 9000, "lr": 3e-3, "warmup_ratio": 0.1, "batch_size": 64, "dropout": 0.0, "seq_len": SEQ_LEN,
            "short_seq_prob": 0.1, "eval_every": 500, "save_every": 1000, "log_every": 50, "precision": "fp32",
            "device": "cpu", "seed": 0, "minutes": None}
STAGES = ({}, {"steps": 12000, "lr": 1.5e-3, "warmup_ratio": 0.05, "seed": 1})
"""The recipe: stage 1 from random weights with ``SETTINGS``, each later stage from the previous stage's weights with
``SETTINGS`` updated by its overrides (a fresh optimiser and schedule)."""
COMMAND = "python scripts/build_chinese_assets.py --model"
MASKINGS = ("character", "whole_word")
"""Token-level masks (the shipped model's) or jieba whole-word masks (``--whole-word``)."""
WHOLE_WORD_COMMAND = "python scripts/chinese_char_bert.py --whole-word"
WHOLE_WORD_RESULTS = ROOT / "notebooks" / "results" / "chinese_whole_word.json"
STAGE_FILE = "stage.json"  # a finished stage's record, beside its weights in final/
FINAL = "final"


def blocks(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(training, held-out) blocks of ``SEQ_LEN`` tokens, poems packed back to back."""
    train = [poem.text for poem in corpus.chinese_poems("train")]
    heldout = [poem.text for poem in corpus.chinese_poems("heldout")]
    return pretraining.pack_blocks(train, tokenizer, SEQ_LEN), pretraining.pack_blocks(heldout, tokenizer, SEQ_LEN)


def stage_dir(number: int, masking: str = "character") -> Path:
    """The run folder of stage ``number`` (1, 2, ...) under runs/, for ``masking`` (one of :data:`MASKINGS`)."""
    if masking not in MASKINGS:
        raise ValueError(f"masking={masking!r}: use one of {', '.join(MASKINGS)}.")
    return RUNS / f"chinese-char-bert{'-wwm' if masking == 'whole_word' else ''}-stage{number}"


def training_word_starts(tokenizer) -> torch.Tensor:
    """Where the jieba words of :func:`blocks`' training blocks begin (whole-word masking)."""
    return chinese.pack_word_starts([poem.text for poem in corpus.chinese_poems("train")], tokenizer, SEQ_LEN)


def train_stage(model: torch.nn.Module, overrides: dict, out: Path, data: tuple[torch.Tensor, torch.Tensor], *,
                word_starts: torch.Tensor | None = None, resume: bool = False) -> tuple[torch.nn.Module, dict]:
    """Pretrain ``model`` in place with ``SETTINGS`` | ``overrides`` into ``out`` (emptied first, unless ``resume``:
    then a finished stage is loaded from ``out`` and an unfinished one continues from its latest checkpoint);
    ``word_starts``: whole-word masks. Returns the model and the stage's record: steps, lr, warm-up, seed, tokens,
    CPU seconds (of this process), its last held-out evaluation and the comparison with the bigram baseline after
    it; the record and the weights are also written to ``out`` (``stage.json``, ``final/``)."""
    tokenizer = chinese.char_tokenizer()
    config = PretrainConfig(**{**SETTINGS, **overrides})
    if resume and (out / STAGE_FILE).exists():
        return BertMLM.from_pretrained(out / FINAL), json.loads((out / STAGE_FILE).read_text())
    if not resume and out.exists():
        shutil.rmtree(out)
    resumed = resume and (out / CHECKPOINT_POINTER).exists()
    cpu = time.process_time()
    result = pretrain(model, tokenizer, *data, config, out_dir=out, progress=False, resume=resume,
                      word_starts=word_starts)
    cpu = time.process_time() - cpu
    heldout = [row for row in result.history if row["split"] == "eval"][-1]
    comparison = chinese.compare_with_bigram(model, tokenizer, chinese.heldout_lines(), chinese.training_bigrams())
    record = stage_record(config, result.steps, cpu, heldout, comparison) | ({"resumed": True} if resumed else {})
    model.save_pretrained(out / FINAL)
    write_json_atomic(out / STAGE_FILE, record)
    return model, record


def stage_record(config: PretrainConfig, steps: int, cpu_seconds: float, heldout: dict, one_at_a_time: dict) -> dict:
    """What results.json keeps of one stage (``heldout``: its final row of held-out scores, frozen masks;
    ``one_at_a_time``: :func:`chinese.compare_with_bigram` on the held-out lines after it)."""
    return {"steps": steps, "lr": config.lr, "warmup_ratio": config.warmup_ratio, "seed": config.seed,
            "tokens_seen": steps * config.batch_size * config.seq_len, "cpu_seconds": round(cpu_seconds, 1),
            "heldout": {key: heldout[key] for key in ("loss", "perplexity", "top1", "top5", "tokens")},
            "one_at_a_time": one_at_a_time}


def train(stages: tuple[dict, ...], run_dirs: list[Path], data: tuple[torch.Tensor, torch.Tensor], *,
          word_starts: torch.Tensor | None = None, resume: bool = False) -> tuple[torch.nn.Module, dict]:
    """Run ``stages`` (overrides of ``SETTINGS``, see :data:`STAGES`) in order, stage i into ``run_dirs[i]``, from
    random weights (seed of stage 1), with whole-word masks where ``word_starts`` is given (:func:`train_stage`;
    ``resume``); returns the model and the run's record (:func:`run_record`)."""
    torch.set_num_threads(1)
    tokenizer = chinese.char_tokenizer()
    model = models.build_model("tiny", tokenizer, seed={**SETTINGS, **stages[0]}["seed"], max_positions=SEQ_LEN,
                               dropout=0.0)
    records = []
    for overrides, out in zip(stages, run_dirs, strict=True):
        model, record = train_stage(model, overrides, out, data, word_starts=word_starts, resume=resume)
        records.append(record)
    command = COMMAND if word_starts is None else WHOLE_WORD_COMMAND
    return model.eval(), run_record(records, PretrainConfig(**{**SETTINGS, **stages[0]}), data, command)


def run_record(stages: list[dict], first: PretrainConfig, data: tuple[torch.Tensor, torch.Tensor],
               command: str = COMMAND) -> dict:
    """The record of a chain of stages: each stage's, their summed steps, tokens and CPU seconds, and stage 1's full
    settings (the later stages change only lr, warm-up, seed and steps)."""
    return {"command": command, "stages": stages, **{key: sum(stage[key] for stage in stages)
                                                      for key in ("steps", "tokens_seen", "cpu_seconds")},
            "training_blocks": len(data[0]), "heldout_blocks": len(data[1]), "vocab_size": len(chinese.char_tokenizer()),
            "settings": asdict(first) | {"betas": list(first.betas), "mask_mix": list(first.mask_mix)},
            "machine": machine(torch.device("cpu"))}


def joined_curve(run_dirs: list[Path]) -> list[dict]:
    """The metrics.jsonl rows of consecutive stages as one curve: each row numbered with its ``stage``, later stages'
    steps shifted after the earlier ones' (wall seconds dropped: CPU time per stage is in results.json)."""
    rows, offset = [], 0
    for number, run_dir in enumerate(run_dirs, start=1):
        stage_rows = read_metrics(run_dir)
        rows += [{key: value for key, value in row.items() if key != "seconds"} | {"step": row["step"] + offset,
                                                                                   "stage": number}
                 for row in stage_rows]
        offset += max(row["step"] for row in stage_rows)
    return rows


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


def _stage_line(number: int, stage: dict) -> str:
    start = "random weights" if number == 1 else f"the weights of stage {number - 1}"
    h, c = stage["heldout"], stage["one_at_a_time"]
    return (f"- Stage {number}, from {start}: {stage['steps']:,} steps ({stage['tokens_seen']:,} tokens), peak learning "
            f"rate {stage['lr']:g} after {stage['warmup_ratio']:.0%} warm-up, seed {stage['seed']}, "
            f"{stage['cpu_seconds'] / 60:.1f} CPU-minutes. After it: held-out loss {h['loss']:.3f}, top-1 {h['top1']:.1%} "
            f"(frozen masks); one character at a time, top-1 {c['bert']['top1']:.1%} against the bigram baseline's "
            f"{c['bigram']['top1']:.1%} (exact McNemar p = {c['mcnemar']['p']:.2g}).\n")


def model_card(summary: dict) -> str:
    """README.md of the shipped folder, from ``results.json``."""
    s, h, u, c = summary["settings"], summary["heldout"], summary["unigram_baseline"], summary["one_at_a_time"]
    stages = "".join(_stage_line(number, stage) for number, stage in enumerate(summary["stages"], start=1))
    return f"""# chinese-char-bert: a character-level BERT pretrained on classical Chinese poems

The course's `mlm_course.bert.BertMLM`, tiny size (2 layers, hidden 128, 2 heads, {summary['parameters']['total']:,}
parameters), with a character vocabulary of {summary["vocab_size"]:,} entries (the five BERT specials, then every
character seen at least twice in the training text). Load it with `mlm_course.models.load_mlm(folder)` or
`AutoModelForMaskedLM` / `AutoTokenizer` on this folder.

## How it was made
```
{summary['command']}
```
runs the {len(summary['stages'])} stages of `STAGES` in `scripts/chinese_char_bert.py`, each with a fresh AdamW and a
linear warm-up then linear decay to 0:
{stages}- In all: {summary['steps']:,} steps × batch {s['batch_size']} × {s['seq_len']} characters = {summary['tokens_seen']:,} tokens,
  {summary['cpu_seconds'] / 60:.1f} CPU-minutes ({summary['machine']['platform']}, torch {summary['machine']['torch']}).
- Every stage: AdamW (betas {tuple(s['betas'])}, weight decay {s['weight_decay']}), clipping at {s['max_grad_norm']}, no
  dropout, fp32, one CPU thread; dynamic masks (15 %, 80 / 10 / 10), {s['short_seq_prob']:.0%} of the sequences cut
  short, logits only at masked positions.

Training text: the train split of `mlm_course/data/chinese/` ({summary['training_blocks']:,} blocks of {s['seq_len']} tokens).
The learning curve of both stages is in `metrics.jsonl` (column `stage`; steps counted from the start of stage 1).

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
         curve: list[dict] | None) -> dict:
    """Write the model, the learning curve ``curve`` (None: keep the shipped metrics.jsonl), results.json and README.md
    (scored on ``data``, :func:`blocks`) into ``folder`` (the tokenizer is there)."""
    model.save_pretrained(folder)
    if curve is not None:
        (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in curve), encoding="utf-8")
    summary = results(model, record, data)
    (folder / "results.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(model_card(summary), encoding="utf-8")
    return summary


def train_and_ship(folder: Path, *, resume: bool = False) -> dict:
    """Train every stage of :data:`STAGES` into runs/ and ship the final model with the joined curve."""
    data = blocks(chinese.char_tokenizer())
    run_dirs = [stage_dir(number) for number in range(1, len(STAGES) + 1)]
    model, record = train(STAGES, run_dirs, data, resume=resume)
    return ship(model, record, folder, data, joined_curve(run_dirs))


def whole_word_results(model: torch.nn.Module, record: dict, data: tuple[torch.Tensor, torch.Tensor],
                       baseline: torch.nn.Module, baseline_record: dict) -> dict:
    """The whole-word run's ``record`` with :func:`results`' held-out figures, and its paired comparison with
    ``baseline`` (the character-masked model of the same recipe; ``baseline_record``: its results.json) on the
    held-out lines, McNemar's a being the character-masked model: ``character_alone``, every known character masked
    alone (the rest of its line visible); ``word_whole``, every character of every multi-character jieba word, its
    whole word masked."""
    tokenizer = chinese.char_tokenizer()
    lines = chinese.heldout_lines()
    names = ("character", "whole_word")
    paired = {"character_alone": chinese.compare_models(baseline, model, tokenizer, lines,
                                                        chinese.mask_units(lines, "character"), names),
              "word_whole": chinese.compare_models(baseline, model, tokenizer, lines, chinese.word_units(lines), names)}
    keep = ("command", "steps", "tokens_seen", "cpu_seconds", "heldout", "one_at_a_time")
    return {**results(model, record, data), "masking": "whole_word (jieba words, 15 % of the words)",
            "evaluation_lines": len(lines), "paired": paired,
            "character_model": {key: baseline_record[key] for key in keep} | {
                "folder": str(corpus.chinese_model_dir().relative_to(ROOT))}}


def write_whole_word_results(model: torch.nn.Module, record: dict, data: tuple[torch.Tensor, torch.Tensor]) -> dict:
    """:func:`whole_word_results` against the shipped model, written to :data:`WHOLE_WORD_RESULTS`."""
    folder = corpus.chinese_model_dir()
    baseline, _ = models.load_mlm(str(folder))
    summary = whole_word_results(model, record, data, baseline, json.loads((folder / "results.json").read_text()))
    WHOLE_WORD_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(WHOLE_WORD_RESULTS, summary)
    return summary


def train_whole_word(*, resume: bool = False) -> dict:
    """Every stage of :data:`STAGES` with whole-word masks into runs/, then :func:`write_whole_word_results`."""
    tokenizer = chinese.char_tokenizer()
    data = blocks(tokenizer)
    run_dirs = [stage_dir(number, "whole_word") for number in range(1, len(STAGES) + 1)]
    model, record = train(STAGES, run_dirs, data, word_starts=training_word_starts(tokenizer), resume=resume)
    return write_whole_word_results(model, record, data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="a timing run of this many steps (nothing shipped)")
    parser.add_argument("--results-only", action="store_true", help="rewrite results.json and README.md (with "
                        "--whole-word: the whole-word results, from the weights of the finished run in runs/)")
    parser.add_argument("--whole-word", action="store_true", help="train with jieba whole-word masks instead and "
                        f"compare with the shipped model in {WHOLE_WORD_RESULTS.relative_to(ROOT)}")
    parser.add_argument("--resume", action="store_true", help="continue a killed run: finished stages are loaded, the "
                        "running one continues from its latest checkpoint")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps {args.steps}: a timing run needs at least 1 step")
    folder = corpus.chinese_model_dir()
    masking = "whole_word" if args.whole_word else "character"
    if args.results_only and args.whole_word:
        run_dirs = [stage_dir(number, masking) for number in range(1, len(STAGES) + 1)]
        if not (run_dirs[-1] / STAGE_FILE).exists():
            parser.error(f"no finished whole-word run in {run_dirs[-1]}: train it first (--whole-word)")
        stages = [json.loads((run_dir / STAGE_FILE).read_text()) for run_dir in run_dirs]
        torch.set_num_threads(1)  # the record's machine is the training's, which ran on one thread (see train)
        data = blocks(chinese.char_tokenizer())
        record = run_record(stages, PretrainConfig(**{**SETTINGS, **STAGES[0]}), data, WHOLE_WORD_COMMAND)
        write_whole_word_results(BertMLM.from_pretrained(run_dirs[-1] / FINAL).eval(), record, data)
    elif args.results_only:
        record = json.loads((folder / "results.json").read_text())
        model, _ = models.load_mlm(str(folder))
        keep = {key: record[key] for key in ("command", "stages", "steps", "cpu_seconds", "tokens_seen",
                                             "training_blocks", "heldout_blocks", "vocab_size", "settings", "machine")}
        ship(model, keep, folder, blocks(chinese.char_tokenizer()), curve=None)
    elif args.steps is not None:
        tokenizer = chinese.char_tokenizer()
        starts = training_word_starts(tokenizer) if args.whole_word else None
        _, record = train(({"steps": args.steps},), [RUNS / f"chinese-char-bert-timing-{masking}"], blocks(tokenizer),
                          word_starts=starts)
        print(json.dumps({key: record[key] for key in ("steps", "cpu_seconds")} | {"masking": masking}))
    elif args.whole_word:
        print(json.dumps(train_whole_word(resume=args.resume)["paired"]))
    else:
        print(json.dumps(train_and_ship(folder, resume=args.resume)["heldout"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
