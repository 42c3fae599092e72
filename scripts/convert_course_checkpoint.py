"""Convert the shipped course checkpoint to the course's one model family and to today's run records (done once,
kept to document where the shipped bytes came from).

    python scripts/convert_course_checkpoint.py

The checkpoint was trained with transformers' ``BertForMaskedLM`` before the course trained its own BERT
(:class:`mlm_course.bert.BertMLM`, equal to it number for number). This loads it into ``BertMLM``, saves it back with
``BertMLM.save_pretrained`` (the same transformers folder; the script checks every tensor is bit-identical) and
rewrites the run records in ``results.json`` (the final run and each stage) from the settings names of that time
(``train_config`` with ``extra``, ``warmup``, ``grad_clip``, ``mixed_precision``, ``mask.rate``) to one flat
``settings`` record with the names ``mlm-course pretrain`` uses now (``warmup_steps``, ``max_grad_norm``,
``precision``, ``mask_rate``, …), and the stage commands in ``results.json`` and the model card to today's option
names (``--config`` is ``--size``). Numbers are not touched.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import load_file

from mlm_course import corpus
from mlm_course.bert import BertMLM
from mlm_course.lab.pretrain_run import PretrainConfig
from mlm_course.lab.run_files import write_json_atomic


def settings(old: dict) -> dict:
    """A ``train_config`` record of the old names as a ``PretrainConfig`` (its validation included)."""
    extra, mask = old["extra"], old["extra"]["mask"]
    warmup = old["warmup"]
    config = PretrainConfig(
        size=None if extra.get("init_from") else extra["model"], init_from=extra.get("init_from"), stack_to=extra.get("stack_to"),
        corpus=extra.get("corpus", "course"), seq_len=extra["seq_len"], dropout=extra["dropout"],
        mask_rate=mask["rate"], mask_mix=tuple(mask["mix"]), mask_scheme=mask["scheme"],
        short_seq_prob=extra.get("short_seq_prob", 0.0), sparse_logits=extra["sparse_logits"], steps=old["steps"],
        minutes=old["minutes"], eval_every=old["eval_every"], save_every=old["save_every"],
        batch_size=old["batch_size"], grad_accum=old["grad_accum"], lr=old["lr"],
        warmup_steps=int(warmup) if warmup >= 1 else None, warmup_ratio=warmup if warmup < 1 else 0.0,
        weight_decay=old["weight_decay"], betas=tuple(old["betas"]), eps=old["eps"], max_grad_norm=old["grad_clip"],
        log_every=old["log_every"], seed=old["seed"], device=old["device"],
        precision="auto" if old["mixed_precision"] else "fp32")
    return json.loads(json.dumps(asdict(config)))  # tuples as lists, as results.json stores them


#: option names of the time the checkpoint was trained → today's (the course's one name per setting)
RENAMED_OPTIONS = {"--config ": "--size "}
CARD_OPENING = ("A `BertForMaskedLM` (tiny:", "The course's BERT, `mlm_course.bert.BertMLM` (trained with transformers'\n"
                "`BertForMaskedLM`, which computes the same numbers, and re-saved by `BertMLM` without a bit changed:\n"
                "`scripts/convert_course_checkpoint.py`), in a transformers `BertForMaskedLM` folder (tiny:")


def todays_options(command: str) -> str:
    for old, new in RENAMED_OPTIONS.items():
        command = command.replace(old, new)
    return command


def convert_records(results: dict) -> dict:
    out = {key: value for key, value in results.items() if key != "train_config"}
    out["settings"] = settings(results["train_config"])
    out["stages"] = [{key: value for key, value in stage.items() if key != "train_config"}
                     | {"settings": settings(stage["train_config"]), "command": todays_options(stage["command"])}
                     for stage in results["stages"]]
    return out


def resave_weights(folder: Path) -> bool:
    """Load the weights into ``BertMLM`` and save them with it; False (nothing written) unless bit-identical."""
    before = load_file(folder / "model.safetensors")
    model = BertMLM.from_pretrained(folder)
    with tempfile.TemporaryDirectory() as temp:
        model.save_pretrained(temp)
        after = load_file(Path(temp) / "model.safetensors")
    if before.keys() != after.keys() or any(not torch.equal(before[k], after[k]) for k in before):
        return False
    model.save_pretrained(folder)
    return True


def main() -> int:
    folder = corpus.course_checkpoint_dir()
    results = json.loads((folder / "results.json").read_text())
    if "train_config" in results:
        if not resave_weights(folder):
            print("the resaved weights differ from the shipped ones: not converted", file=sys.stderr)
            return 2
        write_json_atomic(folder / "results.json", convert_records(results))
    card = (folder / "README.md").read_text()
    (folder / "README.md").write_text(todays_options(card).replace(*CARD_OPENING))
    print(f"{folder}: weights re-saved by BertMLM (bit-identical), run records and model card in today's names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
