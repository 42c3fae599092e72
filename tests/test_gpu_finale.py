"""Notebook 07's finale: the GPU branch's code runs here, on the CPU, with a tiny randomly initialised stand-in for
bert-base (its vocabulary, its folder layout), so the branch is never dead code; the CPU branch as CI runs it."""

import json

import pytest
import torch
from transformers import BertConfig, BertForPreTraining

from mlm_course import tokenization
from mlm_course.lab import gpu_finale

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def bert_base_shaped(tmp_path):
    """A BertForPreTraining folder with bert-base-uncased's vocabulary and tokenizer, tiny otherwise."""
    tokenizer = tokenization.bert_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    folder = tmp_path / "bert-base-uncased"
    BertForPreTraining(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_the_gpu_branch_fine_tunes_the_given_bert(bert_base_shaped, tmp_path):
    rows = gpu_finale.gpu_branch(torch.device("cpu"), tmp_path / "work", source=bert_base_shaped,
                                 sizes=gpu_finale.QUICK)
    assert len(rows) == 1
    row = rows[0]
    assert row["what"] == "fine-tune bert-base-uncased" and row["steps"] == gpu_finale.QUICK.steps
    assert 0.0 <= row["test_accuracy"] <= 1.0 and row["tokens_per_s"] > 0
    assert 0 < row["mfu"] < 1  # against this CPU's measured matmul rate
    assert (tmp_path / "work" / "finetuned" / "config.json").exists()


def test_without_bert_base_the_gpu_branch_pretrains_a_course_bert_first(tmp_path):
    rows = gpu_finale.gpu_branch(torch.device("cpu"), tmp_path, source=None, sizes=gpu_finale.QUICK)
    pretrained, finetuned = rows
    assert pretrained["what"].startswith("pretrain course BERT (tiny)") and pretrained["steps"] >= 1
    assert pretrained["heldout_loss"] > 0 and finetuned["what"] == "fine-tune the course BERT pretrained above"
    assert (tmp_path / "pretrained" / "results.json").exists()


def test_bert_base_comes_from_the_cache_or_the_hub_only_when_allowed(monkeypatch, tmp_path):
    import huggingface_hub

    monkeypatch.delenv("MLM_COURSE_ALLOW_HUB", raising=False)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name: None)
    assert gpu_finale.bert_base_folder() is None  # not cached, hub not allowed: the course BERT instead
    cached = {name: str(tmp_path / name) for name in ("config.json", "model.safetensors", "vocab.txt")}
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name: cached[name])
    assert gpu_finale.bert_base_folder() == str(tmp_path)


@pytest.mark.parametrize(("environ", "modules", "expected"), [
    ({"COLAB_RELEASE_TAG": "release-colab_20261201"}, (), "Colab"), ({}, ("google.colab",), "Colab"),
    ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, (), "Kaggle"), ({}, (), None)])
def test_colab_and_kaggle_are_recognised(monkeypatch, environ, modules, expected):
    import sys
    import types

    for name in ("COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    for name in modules:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    assert gpu_finale.hosted_notebook() == expected


def test_on_a_cpu_the_finale_fine_tunes_the_course_checkpoint(tmp_path):
    finale = gpu_finale.run(tmp_path, device="cpu", quick=True)
    assert finale["branch"] == "cpu" and [row["what"] for row in finale["rows"]] == ["fine-tune the course checkpoint"]


def test_the_cpu_branch_can_say_what_the_gpu_branch_would_do():
    plan = gpu_finale.gpu_plan()
    assert plan.startswith("on a GPU this cell fine-tunes bert-base-uncased (2 epochs) when it is in the Hugging Face")
    assert "allow_hub" in plan and "MLM_COURSE_ALLOW_HUB=1" in plan and "'small' size there for 4 minutes" in plan


def test_the_command_line_writes_the_rows_and_the_sizes(tmp_path):
    out = tmp_path / "finale.json"
    gpu_finale.main(["--out", str(out), "--quick", "--device", "cpu", "--epochs", "1"])
    written = json.loads(out.read_text())
    assert written["branch"] == "cpu" and written["sizes"]["steps"] == gpu_finale.QUICK.steps
    assert written["rows"][0]["steps"] == gpu_finale.QUICK.steps and (tmp_path / "finale").is_dir()
    with pytest.raises(SystemExit):
        gpu_finale.main(["--out", str(out), "--pretrain-minutes", "0"])


def test_fewer_than_one_epoch_is_refused_as_every_command_refuses_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_finale.main(["--out", str(tmp_path / "finale.json"), "--epochs", "0"])
    assert stop.value.code == 2
    assert "argument --epochs: must be a whole number ≥ 1, not '0'" in capsys.readouterr().err
