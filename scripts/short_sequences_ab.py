"""A/B check behind ``--short-seq-prob``: does training on some short sequences help on short inputs?

    python scripts/short_sequences_ab.py --init-from runs/course-bert-stage2

From the same weights, continue pretraining for a few hundred steps once on full 128-token blocks only and once with
a share of the blocks cut short (:func:`mlm_course.pretraining.shorten_blocks`), same batches and masks otherwise.
Each model is scored on the frozen 15 % masks of held-out text packed two ways: 128-token blocks (what the course
reports) and 24-token blocks (``[CLS]`` 22 tokens ``[SEP]``, as short as the probe sentences), and on the probe
sentences of notebook 06. One JSON line per model on stdout. One thread per run: about 3 minutes each on the 2-core
course machine.
"""

from __future__ import annotations

import argparse
import json

import torch

from mlm_course import corpus, tokenization
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain
from mlm_course.models import load_for_training
from mlm_course.pretraining import evaluate_masked_lm, frozen_eval_batches, pack_blocks
from mlm_course.probes import probe_hits


def scores(model, tokenizer, long_eval: torch.Tensor, short_eval: torch.Tensor) -> dict:
    """Held-out masked-LM loss on long and short blocks, and probe-sentence hits (top 5)."""
    model.eval()
    long_loss = evaluate_masked_lm(model, frozen_eval_batches(long_eval, tokenizer))["loss"]
    short_loss = evaluate_masked_lm(model, frozen_eval_batches(short_eval, tokenizer))["loss"]
    hits = sum(row["hit"] for row in probe_hits(model, tokenizer))
    return {"loss_128": round(long_loss, 3), "loss_24": round(short_loss, 3), "probe_hits": hits}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init-from", required=True, help="a saved model trained on full-length blocks only")
    parser.add_argument("--short-seq-probs", type=float, nargs="+", default=[0.0, 0.5],
                        help="short-sequence probabilities to compare")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lr", type=float, default=5e-4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokenizer = tokenization.course_tokenizer()
    train = pack_blocks([corpus.pretraining_text("train")], tokenizer, 128)
    heldout = [corpus.pretraining_text("heldout")]
    long_eval, short_eval = pack_blocks(heldout, tokenizer, 128)[:200], pack_blocks(heldout, tokenizer, 24)[:800]

    def start():
        return load_for_training(args.init_from, tokenizer, seq_len=128, dropout=0.0)

    print(json.dumps({"model": "before", **scores(start(), tokenizer, long_eval, short_eval)}), flush=True)
    for short_seq_prob in args.short_seq_probs:
        model = start()
        config = PretrainConfig(steps=args.steps, batch_size=32, lr=args.lr, warmup_steps=max(1, args.steps // 10),
                                eval_every=10**9, save_every=10**9, seed=5, dropout=0.0, short_seq_prob=short_seq_prob,
                                minutes=None)
        pretrain(model, tokenizer, train, long_eval[:32], config, progress=False)
        print(json.dumps({"model": f"+{args.steps} steps, short_seq_prob {short_seq_prob}",
                          **scores(model, tokenizer, long_eval, short_eval)}), flush=True)


if __name__ == "__main__":
    main()
