"""Probes of a trained masked-LM: probe-sentence hits, accuracy by token frequency, confident mistakes."""

from collections import Counter

import pytest
import torch

from mlm_course import probes
from mlm_course.models import fill_mask
from mlm_course.pretraining import MaskSpec, evaluate_masked_lm, frozen_eval_batches, mask_blocks, pack_blocks

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def blocks(bert_tok, sample_text):
    return pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)


def test_probe_sentences_have_one_blank_and_answers():
    assert len(probes.PROBE_SENTENCES) == 20
    assert all(text.count("[MASK]") == 1 and answers for text, answers in probes.PROBE_SENTENCES)


def test_probe_hits_is_a_hit_exactly_when_an_accepted_answer_is_in_the_top_k(tiny_model, bert_tok):
    model = tiny_model().eval()
    text = "She opened the [MASK] and walked out."
    top3 = [token for token, _ in fill_mask(model, bert_tok, text, top_k=3)[0]]
    rows = probes.probe_hits(model, bert_tok, [(text, {top3[2]}), (text, {"not-a-token"})], top_k=3)
    assert [row["guesses"] for row in rows] == [top3, top3]
    assert [row["hit"] for row in rows] == [True, False]
    assert probes.probe_hits(model, bert_tok, [(text, {top3[2]})], top_k=2)[0]["hit"] is False


def test_accuracy_by_frequency_adds_up_to_the_overall_scores(tiny_model, blocks, bert_tok):
    model = tiny_model().eval()
    batches = frozen_eval_batches(blocks, bert_tok, MaskSpec(), batch_size=3)
    edges = (0.0, 0.001, 0.01, 0.05, 1.0)
    rows = probes.accuracy_by_frequency(model, batches, blocks, len(bert_tok), edges=edges)
    overall = evaluate_masked_lm(model, batches)
    # every masked token is in exactly one bucket, and the buckets' accuracies average to the overall top-1
    assert sum(row["tokens"] for row in rows) == overall["tokens"]
    assert sum(row["tokens"] * row["model_top1"] for row in rows) / overall["tokens"] == pytest.approx(overall["top1"])
    # by hand: each true token's share of the training tokens, and the most frequent training token
    shares = Counter(blocks.flatten().tolist())
    share = {token: count / blocks.numel() for token, count in shares.items()}
    labels = [t for b in batches for t in b["labels"].flatten().tolist() if t != -100]
    most_frequent = shares.most_common(1)[0][0]
    for row, low, high in zip(rows, edges[:-1], edges[1:], strict=True):
        inside = [t for t in labels if low <= share.get(t, 0.0) < high or (high == 1.0 and share.get(t, 0.0) == 1.0)]
        assert row["tokens"] == len(inside), row["bucket"]
        assert row["unigram_top1"] == pytest.approx(sum(t == most_frequent for t in inside) / len(inside) if inside
                                                    else 0.0)
    assert [row["bucket"] for row in rows] == ["0–0.1 %", "0.1–1 %", "1–5 %", "≥ 5 %"]


def test_confident_wrong_fills_are_wrong_sorted_and_scored_in_eval_mode(tiny_model, blocks, bert_tok):
    model = tiny_model().train()
    batch = mask_blocks(blocks[:4], bert_tok, MaskSpec(), torch.Generator().manual_seed(0))
    fills = probes.confident_wrong_fills(model, bert_tok, batch, k=5)
    with torch.no_grad():
        model.eval()
        probs = model(batch["input_ids"], batch["attention_mask"]).softmax(-1)
    model.train()
    best, guesses = probs.max(-1)
    wrong = (batch["labels"] != -100) & (guesses != batch["labels"])
    expected = best[wrong].sort(descending=True).values[:5]
    assert [f["probability"] for f in fills] == pytest.approx(expected.tolist())  # dropout off: eval-mode scores
    assert all(f["guess"] != f["truth"] for f in fills) and model.training  # back in train mode afterwards
