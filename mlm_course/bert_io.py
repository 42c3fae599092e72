"""transformers BERT folders and our BERT (:mod:`mlm_course.bert`): parameter names both ways, reading a folder's
config and weights (in fp32), copying weights into a model with a check of every name and shape, and writing a
folder that ``AutoModelForMaskedLM`` / ``AutoModelForSequenceClassification`` load, atomically.

A transformers folder is ``config.json`` (a ``BertConfig``; ``architectures`` names the class that wrote it) and
``model.safetensors`` (name → tensor, with transformers' names: ``bert.encoder.layer.0.attention.self.query.weight``
is our ``layers.0.attention.query.weight``). Models with a head keep the encoder under ``bert.``; ``BertModel``
(MiniLM's folder) keeps it at the top.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import BertConfig

from mlm_course.atomic import write_files_atomic

#: (transformers, ours): name prefixes, ``{i}`` a layer number. Encoder parts sit under ``bert.`` in transformers.
NAMES = (
    ("embeddings.word_embeddings.", "embeddings.word."),
    ("embeddings.position_embeddings.", "embeddings.position."),
    ("embeddings.token_type_embeddings.", "embeddings.segment."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
    ("encoder.layer.{i}.attention.self.query.", "layers.{i}.attention.query."),
    ("encoder.layer.{i}.attention.self.key.", "layers.{i}.attention.key."),
    ("encoder.layer.{i}.attention.self.value.", "layers.{i}.attention.value."),
    ("encoder.layer.{i}.attention.output.dense.", "layers.{i}.attention.out."),
    ("encoder.layer.{i}.attention.output.LayerNorm.", "layers.{i}.attention_norm."),
    ("encoder.layer.{i}.intermediate.dense.", "layers.{i}.ffn.up."),
    ("encoder.layer.{i}.output.dense.", "layers.{i}.ffn.down."),
    ("encoder.layer.{i}.output.LayerNorm.", "layers.{i}.ffn_norm."),
    ("pooler.dense.", "pooler.dense."),
    ("cls.predictions.transform.dense.", "head.dense."),
    ("cls.predictions.transform.LayerNorm.", "head.norm."),
    ("cls.predictions.bias", "head.bias"),
    ("classifier.", "classifier."),
)
ENCODER_PARTS = ("embeddings.", "encoder.", "pooler.")
#: transformers names with no counterpart here: the decoder (tied: it *is* the word table), the position and
#: segment-id buffers, and ``BertForPreTraining``'s next-sentence head
NO_COUNTERPART = re.compile(r"^cls\.predictions\.decoder\.|^cls\.seq_relationship\.|(position_ids|token_type_ids)$")
WEIGHTS = "model.safetensors"


def _patterns(pairs) -> list[tuple[re.Pattern, str]]:
    return [(re.compile("^" + re.escape(source).replace(r"\{i\}", r"(\d+)")), target) for source, target in pairs]


_TO_OURS = _patterns(NAMES)
_TO_TRANSFORMERS = _patterns((ours, theirs) for theirs, ours in NAMES)


def _rename(name: str, patterns: list[tuple[re.Pattern, str]]) -> str | None:
    for pattern, target in patterns:
        match = pattern.match(name)
        if match:
            return (target.replace("{i}", match[1]) if match.groups() else target) + name[match.end():]
    return None


def our_name(transformers_name: str) -> str | None:
    """Our name for a transformers BERT parameter; None where we have no counterpart (the tied decoder, buffers,
    the next-sentence head). Names we do not know come back unchanged, so that loading reports them."""
    if NO_COUNTERPART.search(transformers_name):
        return None
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", transformers_name)  # TF-era checkpoints
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name).removeprefix("bert.")
    return _rename(name, _TO_OURS) or name


def transformers_name(name: str) -> str:
    """The inverse of :func:`our_name`: the name transformers' ``BertFor…`` models give our parameter ``name``."""
    theirs = _rename(name, _TO_TRANSFORMERS)
    if theirs is None:
        raise ValueError(f"{name!r} is not a parameter of our BERT: it has no transformers name")
    return "bert." + theirs if theirs.startswith(ENCODER_PARTS) else theirs


def copy_in(model: torch.nn.Module, weights: dict[str, torch.Tensor], *, fresh: tuple[str, ...]) -> torch.nn.Module:
    """``model`` with ``weights`` (by our names) copied in. Parts named in ``fresh`` may be absent (they keep their
    fresh values); anything else absent, left over or of another shape is a ValueError that names it."""
    expected = model.state_dict()
    missing = [name for name in expected if name not in weights and not name.startswith(fresh)]
    unexpected = [name for name in weights if name not in expected]
    shapes = [f"{name} {tuple(t.shape)} (here {tuple(expected[name].shape)})"
              for name, t in weights.items() if name in expected and t.shape != expected[name].shape]
    if missing or unexpected or shapes:
        raise ValueError(f"the checkpoint does not fit this {type(model).__name__}: missing {missing}, unexpected "
                         f"{unexpected}, other shapes {shapes}")
    model.load_state_dict(weights, strict=False)
    return model


def _read_config(folder: str | os.PathLike) -> BertConfig:
    """The ``BertConfig`` of a transformers folder; FileNotFoundError without one, ValueError for another model."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} holds no config.json: point to a folder written by save_pretrained")
    values = json.loads(path.read_text())
    if values.get("model_type") != "bert":
        raise ValueError(f"{folder} holds a {values.get('model_type')!r} model ({values.get('architectures')}), "
                         "not a BERT (model_type 'bert'): this module loads BERT checkpoints only")
    return BertConfig.from_dict(values)


def _read_tensors(folder: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A folder's weights by transformers name, floating-point ones in fp32 whatever the folder stores (a bf16
    checkpoint trains on in fp32 master weights; autocast gives the speed)."""
    folder = Path(folder)
    if (folder / WEIGHTS).is_file():
        tensors = load_file(folder / WEIGHTS)
    elif (folder / f"{WEIGHTS}.index.json").is_file():  # sharded: {"weight_map": {name: shard file}}
        shards = set(json.loads((folder / f"{WEIGHTS}.index.json").read_text())["weight_map"].values())
        tensors = {name: t for shard in sorted(shards) for name, t in load_file(folder / shard).items()}
    elif (folder / "pytorch_model.bin").is_file():
        tensors = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"{folder} holds no {WEIGHTS} (nor shards, nor pytorch_model.bin): point to a "
                                "folder written by save_pretrained")
    return {name: t.float() if t.is_floating_point() else t for name, t in tensors.items()}


def write_folder(folder: str | os.PathLike, config: BertConfig, tensors: dict[str, torch.Tensor]) -> Path:
    """``config.json`` and ``model.safetensors`` into ``folder`` (other files there, a tokenizer's, stay).

    Both files are written under temporary names, then renamed (:func:`mlm_course.atomic.write_files_atomic`): an
    old ``config.json`` goes first and the new one comes last, so a save killed part-way leaves either the old
    model, or a folder without ``config.json`` (which nothing loads), or the new model: never new weights read with
    another model's config, nor half a file.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    write_files_atomic({folder / WEIGHTS: lambda temp: save_file(weights, temp, metadata={"format": "pt"}),
                        folder / "config.json": lambda temp: temp.write_text(config.to_json_string())},
                       key=folder / "config.json")
    return folder


def read_folder(folder: str | os.PathLike, *, vocab_size: int | None = None,
                **overrides) -> tuple[BertConfig, dict[str, torch.Tensor]]:
    """(config, weights by transformers name in fp32) of a transformers BERT folder. ``vocab_size`` (the tokenizer's)
    must equal the checkpoint's; ``overrides`` replace config values (dropout, say)."""
    config = _read_config(folder)
    if vocab_size is not None and vocab_size != config.vocab_size:
        raise ValueError(f"{folder} has a vocabulary of {config.vocab_size:,}, but the tokenizer has "
                         f"{vocab_size:,}: load a checkpoint trained with the same tokenizer")
    for key, value in overrides.items():
        if not hasattr(config, key):
            raise ValueError(f"{key!r} is not a BertConfig setting: check its spelling")
        setattr(config, key, value)
    return config, _read_tensors(folder)
