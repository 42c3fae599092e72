"""The masking-ablation grid: its variants, the feature probe, resumable runs, the summary."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from mlm_course import ablations, finetune, masking
from mlm_course.ablations import PAPER_TABLE8, Variant
from mlm_course.lab import ablation_grid
from mlm_course.lab.ablation_grid import TRAINING_BUDGETS


def test_mix_variants_follow_table8_in_our_mix_order():
    """Table 8 names mixes MASK/SAME/RND; masking.mask_tokens takes (MASK, RANDOM, SAME)."""
    mixes = [v for v in ablations.variants(["mix"])]
    assert len(mixes) == len(PAPER_TABLE8) == 6
    for variant, row in zip(mixes, PAPER_TABLE8, strict=True):
        assert variant.label == f"{row['mask']}/{row['same']}/{row['random']}"
        assert variant.mask_mix == pytest.approx((row["mask"] / 100, row["random"] / 100, row["same"] / 100))
        assert masking.MaskSpec(mask_mix=variant.mask_mix).mask_mix == pytest.approx(variant.mask_mix)  # each a valid mix
        assert variant.mask_rate == 0.15 and variant.static_copies is None and not variant.small_data


def test_bert_recipe_is_one_run_shared_by_the_mix_and_rate_families():
    grid = ablations.variants()
    keys = [v.key for v in grid]
    baseline = Variant("x", "x").key
    assert keys.count(baseline) == 2  # "80/10/10" and "15 %"
    assert len(set(keys)) == len(keys) - 1  # every other variant trains differently
    assert sorted(v.mask_rate for v in grid if v.family == "rate") == [0.15, 0.30, 0.40, 0.60]
    static = [v for v in grid if v.family == "static"]
    assert [v.static_copies for v in static] == [None, 1] and all(v.small_data for v in static)


def test_unknown_family_is_refused():
    with pytest.raises(ValueError, match="choose from"):
        ablations.variants(["mixes"])


def test_sentence_features_ignore_padding_and_batching(tiny_model, bert_tok):
    encoder = tiny_model().eval()
    data = finetune.encode(bert_tok, ["a short one .", "a much longer sentence than the first one , really ."],
                           [0, 1])
    together = ablations.sentence_features(encoder, data, bert_tok.pad_token_id)
    alone = np.concatenate([
        ablations.sentence_features(encoder, finetune.Encoded([ids], [0], ["."]), bert_tok.pad_token_id)
        for ids in data.input_ids
    ])
    assert np.allclose(together, alone, atol=1e-5)
    with torch.no_grad():  # by hand: the mean of the last hidden states of the first sentence
        hidden = encoder.last_hidden_state(torch.tensor([data.input_ids[0]]))[0]
    assert np.allclose(together[0], hidden.mean(0).numpy(), atol=1e-5)


def test_feature_probe_picks_the_strength_on_dev_and_reports_its_test_accuracy(tiny_model, bert_tok):
    texts = [f"{word} movie number {i} ." for i in range(40) for word in ("good", "bad")]
    labels = [i % 2 for i in range(80)]
    split = {name: finetune.encode(bert_tok, texts[k::3], labels[k::3]) for k, name in enumerate(["train", "dev", "test"])}
    encoder = tiny_model()
    result = ablations.feature_probe(encoder, split, bert_tok.pad_token_id, strengths=(0.01, 1.0))
    x = {k: ablations.sentence_features(encoder, v, bert_tok.pad_token_id) for k, v in split.items()}
    y = {k: np.asarray(v.labels) for k, v in split.items()}
    dev_scores = {}
    for c in (0.01, 1.0):
        probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000)).fit(x["train"], y["train"])
        dev_scores[c] = (probe.score(x["dev"], y["dev"]), probe.score(x["test"], y["test"]))
    best = max(dev_scores, key=lambda c: (dev_scores[c][0], -list(dev_scores).index(c)))
    assert result["C"] == best
    assert result["dev_accuracy"] == pytest.approx(dev_scores[best][0])
    assert result["test_accuracy"] == pytest.approx(dev_scores[best][1])
    assert result["test_accuracy"] > 0.8, "the word good/bad is in the features: a linear probe must find it"


def test_quick_grid_runs_stores_each_run_and_skips_finished_runs(tmp_path, monkeypatch):
    budget = TRAINING_BUDGETS["quick"]
    rows = ablation_grid.run_grid(budget, tmp_path, families=["static"], log=lambda line: None)
    assert [row["key"] for row in rows] == [v.key for v in ablations.variants(["static"])]
    for row in rows:
        assert (tmp_path / row["key"] / f"seed-{row['seed']}.json").exists()
        assert row["heldout"]["tokens"] > 0 and 0 <= row["probe"]["test_accuracy"] <= 1
        assert row["epochs"] > 1, "the static family trains on a small slice for several epochs"
        tuned = row["finetune"]  # the stored grid's recipe, with the share predicted positive and collapse recorded
        assert tuned["steps"] > 0 and 0 <= tuned["predicted_positive_share"] <= 1
        share = tuned["predicted_positive_share"]
        assert tuned["collapsed"] == (max(share, 1 - share) >= 0.95)
    monkeypatch.setattr(ablation_grid, "run_variant", lambda *a, **k: pytest.fail("a finished run was trained again"))
    assert ablation_grid.run_grid(budget, tmp_path, families=["static"], log=lambda line: None) == rows


def test_the_stored_grid_fine_tunes_with_notebook_07s_recipe():
    """At least label_grid.MIN_STEPS steps (the recipe that stopped 07's collapses), not one 125-step epoch."""
    from mlm_course.lab import label_grid

    cpu = TRAINING_BUDGETS["cpu"]
    assert cpu.finetune_min_steps == label_grid.MIN_STEPS
    config = label_grid.recipe(cpu.train_examples, cpu.finetune_lr, 0, epochs=cpu.finetune_epochs,
                               min_steps=cpu.finetune_min_steps)
    per_epoch = math.ceil(cpu.train_examples / config.batch_size)
    assert config.epochs * per_epoch >= 600 and per_epoch == 125 and config.patience is None


def test_summary_means_and_t_half_widths_by_hand():
    budget = TRAINING_BUDGETS["quick"]
    key = ablations.variants(["rate"])[1].key  # 30 %
    rows = [{"key": key, "seed": s, "heldout": {"loss": loss, "top1": 0.1}, "finetune": {"test_accuracy": acc},
             "probe": {"test_accuracy": 0.5}} for s, (loss, acc) in enumerate([(5.0, 0.6), (6.0, 0.7), (7.0, 0.8)])]
    lines = {line["label"]: line for line in ablations.summarise(rows, budget.static_copies, ["rate"])}
    assert lines["30 %"]["seeds"] == 3
    # sample sd 1.0 and 0.1 over 3 seeds: half-width t(0.975, 2 df) = 4.3027 × sd / √3
    assert lines["30 %"]["heldout_loss"] == pytest.approx((6.0, 4.302653 / np.sqrt(3)))
    assert lines["30 %"]["finetune_acc"] == pytest.approx((0.7, 0.1 * 4.302653 / np.sqrt(3)))
    assert lines["15 %"]["seeds"] == 0 and np.isnan(lines["15 %"]["probe_acc"][0])
    table = ablations.summary_table({"summary": list(lines.values())}, "rate").splitlines()
    assert table[2].split() == ["30", "%", "3", "6.000", "±", "2.484", "70.0", "±", "24.8", "50.0", "±", "0.0"]
    assert table[1].split() == ["15", "%", "0", "–", "–", "–"]


def test_results_document_and_table(tmp_path):
    budget = TRAINING_BUDGETS["quick"]
    rows = [{"key": Variant("x", "x").key, "seed": 0, "heldout": {"loss": 6.5, "top1": 0.1},
             "finetune": {"test_accuracy": 0.61}, "probe": {"test_accuracy": 0.55}}]
    document = ablation_grid.results_document(rows, budget, command="test", seconds=1.0)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    table = ablations.summary_table(ablations.load_results(path), "mix")
    assert "80/10/10" in table.splitlines()[1] and "84.2" in table.splitlines()[1]
    assert "61.0" in table and "±" not in table  # one seed: a mean, no interval
    assert document["machine"]["cpus"] >= 1 and document["budget"]["tokens_per_run"] == 10 * 8 * 64
    with pytest.raises(FileNotFoundError, match="run_ablations.py"):
        ablations.load_results(tmp_path / "missing.json")


def test_stored_run_only_matches_the_same_budget():
    budget = TRAINING_BUDGETS["quick"]
    key = Variant("x", "x").key
    row = {"key": key, "seed": 0, "heldout": {"loss": 6.5, "top1": 0.1}, "finetune": {"test_accuracy": 0.6},
           "probe": {"test_accuracy": 0.5}}
    document = json.loads(json.dumps(ablation_grid.results_document([row], budget, command="t", seconds=1.0)))
    assert ablation_grid.stored_run(document, budget, key, 0) == row
    assert ablation_grid.stored_run(document, budget, key, 1) is None
    assert ablation_grid.stored_run(document, TRAINING_BUDGETS["cpu"], key, 0) is None


def test_runs_claimed_by_a_live_process_are_skipped_stale_claims_are_taken_over(tmp_path, monkeypatch):
    import os

    budget = TRAINING_BUDGETS["quick"]
    trained = []
    monkeypatch.setattr(ablation_grid, "load_data", lambda budget: None)
    monkeypatch.setattr(ablation_grid, "run_variant", lambda variant, seed, *a, **k: trained.append(variant.key) or {
        "key": variant.key, "seed": seed, "heldout": {"loss": 6.0}, "finetune": {"test_accuracy": 0.5},
        "probe": {"test_accuracy": 0.5}, "seconds": {"total": 1.0}})
    dynamic, static = [v.key for v in ablations.variants(["static"])]
    (tmp_path / dynamic).mkdir()
    (tmp_path / dynamic / "seed-0.claim").write_text(str(os.getpid()))  # alive: another process runs it
    (tmp_path / static).mkdir()
    (tmp_path / static / "seed-0.claim").write_text("999999999")  # no such process: a killed run's leftover
    log = []
    rows = ablation_grid.run_grid(budget, tmp_path, families=["static"], log=log.append)
    assert trained == [static] and [row["key"] for row in rows] == [static]
    assert "another process" in log[0] and "held-out loss 6.000" in log[1]
    assert not (tmp_path / static / "seed-0.claim").exists() and (tmp_path / static / "seed-0.json").exists()


def test_heldout_split_by_action_adds_up_to_the_runs_heldout_figures():
    """The split is of the same frozen masks pretrain() scores: its "all" equals the run's held-out loss, the three
    groups partition the positions (about 80/10/10 of them), and at "unchanged" positions the input shows the label."""
    from mlm_course.pretraining import MaskSpec, frozen_eval_batches

    budget = TRAINING_BUDGETS["quick"]
    data = ablation_grid.load_data(budget)
    model, row = ablation_grid.pretrain_variant(ablations.variants(["mix"])[1], 0, budget, data)  # 100/0/0
    split = row["heldout_by_action"]
    assert split["all"]["loss"] == pytest.approx(row["heldout"]["loss"], abs=1e-4)
    assert split["all"]["top1"] == pytest.approx(row["heldout"]["top1"], abs=1e-9)
    counts = [split[name]["tokens"] for name in masking.ACTION_NAMES[1:]]
    assert sum(counts) == split["all"]["tokens"] == row["heldout"]["tokens"]
    assert counts[0] / sum(counts) == pytest.approx(0.8, abs=0.06)  # 80 % of ~270 positions shown as [MASK]
    batches = frozen_eval_batches(data.eval_blocks, data.tokenizer, MaskSpec())
    shown_true = sum(int(((b["labels"] != -100) & (b["input_ids"] == b["labels"])).sum()) for b in batches)
    assert split["unchanged"]["tokens"] == shown_true
    weighted = sum(split[name]["loss"] * split[name]["tokens"] for name in masking.ACTION_NAMES[1:]) / sum(counts)
    assert weighted == pytest.approx(split["all"]["loss"], rel=1e-6)


def test_heldout_baselines_by_hand():
    data = ablation_grid.load_data(TRAINING_BUDGETS["quick"])
    levels = ablation_grid.heldout_baselines(data)
    vocab = len(data.tokenizer)
    assert levels["chance"]["loss"] == pytest.approx(np.log(vocab)) and levels["chance"]["top1"] == 1 / vocab
    # by hand: add-one counts of the training tokens, specials never predicted, mean −log p over the masked labels
    counts = np.bincount(data.train_blocks.flatten().numpy(), minlength=vocab).astype(float) + 1
    counts[data.tokenizer.all_special_ids] = 0
    from mlm_course.pretraining import MaskSpec, frozen_eval_batches

    labels = np.concatenate([b["labels"][b["labels"] != -100].numpy()
                             for b in frozen_eval_batches(data.eval_blocks, data.tokenizer, MaskSpec())])
    assert levels["unigram"]["loss"] == pytest.approx(float(-np.log(counts[labels] / counts.sum()).mean()))
    assert levels["unigram"]["tokens"] == len(labels) == levels["chance"]["tokens"]
    assert levels["unigram"]["loss"] < levels["chance"]["loss"]


def test_heldout_only_grid_stores_apart_and_summarises_without_downstream_scores(tmp_path):
    budget = TRAINING_BUDGETS["quick"]
    rows = ablation_grid.run_grid(budget, tmp_path, families=["static"], log=lambda line: None, downstream=False)
    for row in rows:
        assert (tmp_path / row["key"] / "seed-0-heldout.json").exists()
        assert not (tmp_path / row["key"] / "seed-0.json").exists()
        assert "finetune" not in row and "probe" not in row and row["heldout_by_action"]["all"]["tokens"] > 0
    document = ablation_grid.results_document(rows, budget, command="t", seconds=1.0, families=["static"])
    line = document["summary"][0]
    assert line["values"]["finetune_acc"] == [] and np.isnan(line["finetune_acc"][0])
    assert line["heldout_loss_unchanged"][0] == pytest.approx(rows[0]["heldout_by_action"]["unchanged"]["loss"])
    table = ablations.by_action_table(document, "static")
    assert table.splitlines()[0].split()[:2] == ["variant", "seeds"] and "unchanged (10 %)" in table
    assert table.splitlines()[1].split()[2] == f"{rows[0]['heldout_by_action']['all']['loss']:.3f}"
    assert "±" not in table  # one seed: the mean alone


def test_by_action_means_are_means_over_seeds_with_t_half_widths_by_hand():
    budget = TRAINING_BUDGETS["quick"]
    key = ablations.variants(["mix"])[1].key  # 100/0/0

    def run(seed, mask_loss):
        split = {action: {"loss": loss, "tokens": tokens} for action, loss, tokens in
                 (("all", 6.5, 10), ("[MASK]", mask_loss, 8), ("random token", 6.9, 1), ("unchanged", 6.4, 1))}
        return {"key": key, "seed": seed, "heldout": {"loss": 6.5, "top1": 0.1}, "heldout_by_action": split,
                "finetune": {"test_accuracy": 0.6}, "probe": {"test_accuracy": 0.5}}

    rows = [run(0, 6.0), run(1, 6.2)]
    document = {"runs": rows, "summary": ablations.summarise(rows, budget.static_copies, ["mix"])}
    means = ablations.by_action_means(document, "mix")
    assert list(means) == ["100/0/0"]  # the other mixes have no runs here
    # two seeds: mean 6.1, sd 0.1414; half-width t(0.975, 1 df) = 12.7062 × sd / √2 = 1.2706
    assert means["100/0/0"]["[MASK]"] == pytest.approx({"loss": 6.1, "loss_ci95": 1.270620, "tokens": 8})
    assert means["100/0/0"]["unchanged"]["loss"] == pytest.approx(6.4) and means["100/0/0"]["all"]["tokens"] == 10


def test_the_stored_grid_reads_under_the_names_of_the_settings():
    """notebooks/results/ablations_cpu.json names the settings as the code does (``size``, ``mask_rate``,
    ``mask_mix``): the cpu budget finds its stored runs, each summary line carries its variant's masking, and every run
    has its held-out split by action and its fine-tuning collapse record."""
    document = ablations.load_results(Path(__file__).resolve().parents[1] / "notebooks" / "results" / "ablations_cpu.json")
    by_key = {v.key: v for v in ablations.variants()}
    run = document["runs"][0]
    assert ablation_grid.stored_run(document, TRAINING_BUDGETS["cpu"], run["key"], run["seed"]) == run
    for line in document["summary"]:
        variant = by_key[line["key"]]
        assert (line["mask_rate"], tuple(line["mask_mix"])) == (variant.mask_rate, variant.mask_mix)
    assert all("heldout_by_action" in row and "collapsed" in row["finetune"] for row in document["runs"])


def test_variants_are_compared_with_the_reference_paired_by_seed_with_holm():
    from scipy import stats

    def run(key, seed, loss, accuracy):
        return {"key": key, "seed": seed, "heldout": {"loss": loss, "top1": 0.1},
                "finetune": {"test_accuracy": accuracy}, "probe": {"test_accuracy": 0.5}}

    rows = [run("bert", s, 6.2 + 0.01 * s, 0.60 + 0.02 * s) for s in range(3)]
    rows += [run("more", s, 6.1 + 0.01 * s + 0.001 * s * s, 0.61 + 0.02 * s) for s in range(3)]
    rows.append(run("more", 7, 1.0, 0.9))  # a seed the reference lacks is left out
    loss, accuracy = ablations.against_reference(rows, "bert", ["more"], ["heldout_loss", "finetune_acc"])
    expected = stats.ttest_rel([6.1, 6.111, 6.124], [6.2, 6.21, 6.22])
    assert loss["n"] == 3 and loss["p"] == pytest.approx(expected.pvalue)
    assert loss["mean_difference"] == pytest.approx(-(0.1 + 0.099 + 0.096) / 3)
    # fine-tuning: +0.01 on every seed, no spread at all: t is infinite and p = 0; Holm ranks it first (× 2)
    assert accuracy["t"] == math.inf and accuracy["p"] == 0 and accuracy["adjusted_p"] == 0
    assert loss["adjusted_p"] == pytest.approx(loss["p"]) and loss["detected"] and accuracy["detected"]
