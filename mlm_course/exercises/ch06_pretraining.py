"""Exercises of notebook 06_pretraining: parameter shares, the training step written by the learner (checked
against :func:`mlm_course.steps.training_step`), the schedule, the baseline, sparse logits, and why the training loss
ends below the held-out loss."""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from transformers import BertConfig

from mlm_course.bert import BertMLM
from mlm_course.exercises import Between, Exercise, Near, Text, multiple_choice, numeric, register
from mlm_course.exercises.step_check import StepExercise, grade_step, slipped_step
from mlm_course.masking import MaskSpec
from mlm_course.models import CONFIGS
from mlm_course.objective import masked_lm_loss
from mlm_course.pretraining import mask_blocks, pack_blocks
from mlm_course.steps import linear_schedule
from mlm_course.tokenization import course_tokenizer

COURSE_VOCAB = 8192
TINY_HIDDEN = CONFIGS["tiny"]["hidden_size"]

# ---- 06.1: where the parameters sit, with another vocabulary ----------------------------------------------------
# build_model("tiny", tok, max_positions=128): embeddings = words + 128 positions + 2 token types + LayerNorm;
# the head = a 128 × 128 transform + LayerNorm + one output bias per vocabulary entry (its matrix is the tied table)
_NOT_WORDS = 128 * TINY_HIDDEN + 2 * TINY_HIDDEN + 2 * TINY_HIDDEN  # positions, token types, LayerNorm
_ENCODER, _HEAD_FIXED = 396_544, TINY_HIDDEN * TINY_HIDDEN + TINY_HIDDEN + 2 * TINY_HIDDEN


def _word_share(vocab: int, *, bias_grows: bool = True, tied: bool = True) -> float:
    words = vocab * TINY_HIDDEN
    head = _HEAD_FIXED + (vocab if bias_grows else COURSE_VOCAB) + (0 if tied else words)
    return words / (words + _NOT_WORDS + _ENCODER + head)


_BERT_VOCAB = 30_522

numeric(
    "06.1",
    Text("In §2 the word embeddings are 71 % of the tiny model. Built the same way (hidden 128, 2 layers, "
         "128 positions, output layer tied to the embeddings) but for bert-base-uncased's 30,522-entry vocabulary, "
         "what share of all its parameters would the word-embedding table be? (a float between 0 and 1)",
         "第 2 节中，词嵌入占小模型参数的 71 %。用同样的方式构建（隐藏维度 128，2 层，128 个位置，"
         "输出层与嵌入绑定），但用 bert-base-uncased 的 30,522 个条目的词表，词嵌入表会占全部参数的多大比例？"
         "（一个 0 到 1 之间的浮点数）"),
    _word_share(_BERT_VOCAB),
    wrong={
        Between(1, math.inf):
            Text("give the share of all parameters, a number between 0 and 1 (e.g. 0.71 for the course vocabulary).",
                 "给出占全部参数的比例，一个 0 到 1 之间的数（例如课程词表的 0.71）。"),
        Near(_word_share(COURSE_VOCAB), abs_tol=5e-3):
            Text("that is the share with the course's 8,192 entries; redo it with bert-base-uncased's 30,522.",
                 "这是用课程 8,192 个条目的词表得到的比例；换成 bert-base-uncased 的 30,522 个条目重新算。"),
        _word_share(_BERT_VOCAB, bias_grows=False):
            Text("close: the output layer's bias also has one entry per vocabulary word, so the head grows too.",
                 "很接近了：输出层的偏置也是词表中每个词一个条目，所以头也会变大。"),
        _word_share(_BERT_VOCAB, tied=False):
            Text("the output matrix is tied to the word embeddings (the same tensor): count it once.",
                 "输出矩阵与词嵌入绑定（是同一个张量）：只数一次。"),
    },
    fallback=Text("only the vocabulary-sized parts change: the word table (vocabulary × 128) and the output bias "
                  "(one per word); positions, token types, LayerNorm and the encoder stay as printed in §2.",
                  "只有与词表大小有关的部分会变：词嵌入表（词表大小 × 128）和输出偏置（每个词一个）；"
                  "位置、片段类型、LayerNorm 和编码器保持第 2 节打印的数字不变。"),
    rel_tol=1e-9, abs_tol=5e-4,  # math.isclose's default rel_tol
)

# ---- 06.2: write the pretraining step ---------------------------------------------------------------------------
_TEXT_62 = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
            "want of a wife. However little known the feelings or views of such a man may be on his first entering "
            "a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
            "considered the rightful property of some one or other of their daughters.")


def _setup_62() -> tuple[BertMLM, dict[str, torch.Tensor]]:
    """A one-layer BertMLM on the course vocabulary, dropout 0.1, and one masked batch of five 16-token blocks."""
    tok = course_tokenizer()
    batch = mask_blocks(pack_blocks([_TEXT_62], tok, seq_len=16), tok, MaskSpec(), torch.Generator().manual_seed(62))
    config = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, pad_token_id=tok.pad_token_id,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    return BertMLM(config, seed=62), batch


def _every_position_against_input_ids(model, batch):
    logits = model(batch["input_ids"], batch["attention_mask"])
    return F.cross_entropy(logits.flatten(0, 1), batch["input_ids"].flatten())


_STEP_62 = StepExercise(
    build=_setup_62,
    loss_fn=masked_lm_loss,
    loss_name="objective.masked_lm_loss",
    loss_slips=((_every_position_against_input_ids,
                 Text("the loss was taken at every position against input_ids (notebook 05's labels=input_ids bug): the "
                      "model is taught to copy its input, [MASK] included. Score only the masked positions against their "
                      "labels: objective.masked_lm_loss(model, batch).",
                      "损失是在每个位置上对照 input_ids 计算的（笔记本 05 里 labels=input_ids 的错误）："
                      "模型被教成照抄输入，[MASK] 也照抄。只在被掩码的位置上对照标签计分："
                      "objective.masked_lm_loss(model, batch)。")),),
    fall=2.0,
)


def _solution_62():
    from mlm_course.objective import masked_lm_loss

    def my_step(model, batch, optimizer, scheduler):
        model.train()  # dropout on: the model may come from an evaluation, in eval mode
        loss = masked_lm_loss(model, batch)  # mean −log p(true token) over the masked positions
        loss.backward()  # d(loss)/d(weight), added into every weight's .grad
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # scale the gradient down to norm ≤ 1
        optimizer.step()  # AdamW's update, with the clipped gradients
        scheduler.step()  # the learning rate of the next step (warm-up, then decay)
        optimizer.zero_grad()  # or the next step's gradients would add to these
        return loss

    return my_step


register(Exercise(
    id="06.2",
    text=(Text("Write my_step(model, batch, optimizer, scheduler) -> loss: one masked-LM training step of the course's "
                 "BertMLM on a batch from pretraining.mask_blocks (input_ids, attention_mask, labels, masked_positions): "
                 "the loss objective.masked_lm_loss(model, batch), backward, clip the gradient norm to 1.0, the "
                 "optimiser's step, the scheduler's step, zero the gradients; return the loss. Checked against "
                 "steps.training_step on a copy of the same model (which comes in eval mode), with the same dropout "
                 "masks: the same loss, the same clipped gradients and learning rate for 3 steps, and a loss that "
                 "falls over 20.",
                 "编写 my_step(model, batch, optimizer, scheduler) -> loss：课程的 BertMLM 在一个来自 "
                 "pretraining.mask_blocks 的批量（input_ids、attention_mask、labels、masked_positions）上的一个"
                 "掩码语言模型训练步：损失 objective.masked_lm_loss(model, batch)，反向传播，把梯度范数裁剪到 1.0，"
                 "优化器的一步，调度器的一步，把梯度清零；返回损失。对照 steps.training_step 在同一模型的副本上检查"
                 "（模型以 eval 模式传入），dropout 掩码相同：前 3 步的损失、裁剪后的梯度和学习率都相同，"
                 "并且损失在 20 步内下降。")),
    grade=partial(grade_step, _STEP_62),
    solution=_solution_62,
    wrong_answers=(
        slipped_step(masked_lm_loss, "my_step_without_zero_grad", zero_grad=False),
        slipped_step(masked_lm_loss, "my_step_without_clipping", clip="none"),
        slipped_step(masked_lm_loss, "my_step_clipping_after_the_update", clip="after"),
        slipped_step(masked_lm_loss, "my_step_without_scheduler_step", schedule="none"),
        slipped_step(masked_lm_loss, "my_step_scheduler_first", schedule="before"),
        slipped_step(masked_lm_loss, "my_step_without_train_mode", train=False),
        slipped_step(_every_position_against_input_ids, "my_step_with_labels_input_ids"),
    ),
))

# ---- 06.3: the learning-rate schedule ---------------------------------------------------------------------------
_LR = 3e-3 * linear_schedule(700, 14_000)(7_350)

numeric(
    "06.3",
    Text("lr 3e-3, 700 warm-up steps, 14,000 steps, linear decay to 0: the learning rate at step 7,350?",
         "学习率 3e-3，预热 700 步，共 14,000 步，线性衰减到 0：第 7,350 步的学习率是多少？"),
    _LR,
    wrong={
        3e-3: Text("after the warm-up the rate decays linearly to 0 at the last step: it is no longer the peak.",
                   "预热之后学习率线性衰减，到最后一步为 0：它已经不是峰值了。"),
        3e-3 * (1 - 7_350 / 14_000):
            Text("the decay starts after the 700 warm-up steps: factor = (14,000 − 7,350) / (14,000 − 700).",
                 "衰减从 700 步预热之后开始：factor = (14,000 − 7,350) / (14,000 − 700)。"),
    },
    fallback=Text("factor = (total − step) / (total − warm-up) after the warm-up; multiply the peak lr by it.",
                  "预热之后 factor = (total − step) / (total − warm-up)；把峰值学习率乘以它。"),
    rel_tol=1e-6, abs_tol=0.0,
)

# ---- 06.4: the baseline is an entropy ---------------------------------------------------------------------------
_PROBS = (0.5, 0.25, 0.25)
_ENTROPY = -sum(p * math.log(p) for p in _PROBS)

numeric(
    "06.4",
    Text("Loss (nats) of a unigram predictor that knows the probabilities [0.5, 0.25, 0.25] exactly?",
         "一个确切知道概率 [0.5, 0.25, 0.25] 的一元预测器，损失（奈特）是多少？"),
    _ENTROPY,
    wrong={
        1.5: Text("1.5 is the entropy in bits (log2); the loss of the notebooks is in nats (natural log).",
                  "1.5 是以比特（log2）计的熵；笔记本里的损失以奈特（自然对数）为单位。"),
        math.log(3): Text("ln 3 is the loss of a uniform guess; the predictor knows the probabilities: −Σ p ln p.",
                          "ln 3 是均匀猜测的损失；这个预测器知道概率：−Σ p ln p。"),
    },
    fallback=Text("the expected loss is −Σ p ln p over the tokens (the entropy of the distribution), in nats.",
                  "期望损失是在词元上求 −Σ p ln p（分布的熵），单位是奈特。"),
    rel_tol=1e-4, abs_tol=0.0,
)

# ---- 06.5: what sparse logits save ------------------------------------------------------------------------------
_POSITIONS = 32 * 128
_SAVED = (_POSITIONS - round(_POSITIONS * 0.15)) * COURSE_VOCAB

numeric(
    "06.5",
    Text("Batch 32 × 128, 15 % masked, vocabulary 8,192: how many fewer logits does a sparse step compute?",
         "批量 32 × 128，掩码 15 %，词表 8,192：稀疏的一步少算多少个 logits？"),
    _SAVED,
    wrong={
        _POSITIONS * COURSE_VOCAB:
            Text("that is what the full version computes; subtract what the sparse version still computes.",
                 "这是完整版本计算的量；减去稀疏版本仍要计算的量。"),
        round(_POSITIONS * 0.15) * COURSE_VOCAB:
            Text("that is what the sparse version computes (the masked positions); the question asks for the saving.",
                 "这是稀疏版本计算的量（被掩码的位置）；题目问的是省下的量。"),
    },
    fallback=Text("(all positions − masked positions) × vocabulary size, with 15 % of 32 × 128 positions masked.",
                  "(所有位置 − 被掩码位置) × 词表大小，32 × 128 个位置中有 15 % 被掩码。"),
)

# ---- 06.6: explain why the training loss ends below the held-out loss ----------------------------------------------
multiple_choice(
    "06.6",
    Text("At the end of the shipped checkpoint's curve (§6) its training loss is about 0.6 nats below its held-out loss, "
         "while the held-out loss is still falling. Which explanation fits the measurements of §6?",
         "在随课程提供的检查点曲线的末尾（第 6 节），它的训练损失比留出损失低约 0.6 奈特，"
         "而留出损失仍在下降。哪种解释符合第 6 节的测量结果？"),
    {
        "a": Text("The held-out chapters and articles use rarer words than the training text, so they are simply harder "
                  "to predict, for any model and at every step of the run.",
                  "留出的章节和文章比训练文本用了更罕见的词，所以对任何模型、在训练的每一步，它们都更难预测。"),
        "b": Text("Training batches get fresh masks every step, and fresh masks are easier to fill in than the frozen "
                  "held-out masks, which were drawn once, with a fixed seed.",
                  "训练批量每一步都用新的掩码，而新的掩码比冻结的留出掩码更容易填，"
                  "后者是用固定的随机种子一次性抽出的。"),
        "c": Text("The training loss is an average over the steps of each log interval, so it lags behind the weights and "
                  "reads lower than the held-out loss, which scores the final weights.",
                  "训练损失是每个记录区间内各步的平均，所以它落后于权重，读数比用最终权重计分的留出损失更低。"),
        "d": Text("It has seen each training block about 136 times and knows that text better than new text; with the "
                  "held-out loss still falling, this is not yet harmful overfitting.",
                  "它把每个训练块看了约 136 遍，对那些文本比对新文本更熟；而留出损失仍在下降，"
                  "所以这还不是有害的过拟合。"),
    },
    "d",
    {
        "a": Text("the unigram baseline measures exactly that, and it differs by only about 0.1 nats between the training "
                  "sample and the held-out set; the rest of the gap is the model's.",
                  "一元基线恰好衡量的就是这一点，而它在训练样本和留出集之间只差约 0.1 奈特；差距的其余部分来自模型。"),
        "b": Text("fresh and frozen masks are drawn by the same rule (15 %, 80/10/10); frozen only means the same "
                  "positions at every evaluation. The gap is there when the final weights score a training sample with "
                  "frozen masks too.",
                  "新掩码和冻结掩码按同一规则抽取（15 %，80/10/10）；冻结只是说每次评估用相同的位置。"
                  "用最终权重给带冻结掩码的训练样本计分时，差距同样存在。"),
        "c": Text("a lag makes the training loss *higher* while the loss is falling, not lower; and the gap is also there "
                  "when the final weights score a training sample with frozen masks.",
                  "在损失下降期间，滞后会让训练损失*更高*，而不是更低；而且用最终权重给带冻结掩码的训练样本计分时，"
                  "差距同样存在。"),
    },
)
