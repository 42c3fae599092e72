"""Exercises of notebook 07_fine_tuning: the fine-tuning step written by the learner (checked against
:func:`mlm_course.steps.training_step`), accuracy and F1 from a confusion matrix, the classification head by hand,
length-bucketed batches, why MiniLM's lead is no evidence for masked-LM pretraining nor its zero-shot PLL for word
order, and the mixed-precision step (checked on the CPU by :mod:`mlm_course.exercises.amp_step_check`)."""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from transformers import BertConfig

from mlm_course.bert import BertClassifier
from mlm_course.exercises import Exercise, Text, multiple_choice, numeric_grader, register
from mlm_course.exercises.amp_step_check import amp_slipped_step, grade_amp_step
from mlm_course.exercises.step_check import StepExercise, grade_step, slipped_step
from mlm_course.finetune import classification_loss, encode, pad_batch
from mlm_course.tokenization import course_tokenizer

# ---- 07.1: write the fine-tuning step ---------------------------------------------------------------------------
_REVIEWS_71 = (  # (sentence, label: 1 positive, 0 negative), of different lengths, so the batch is padded
    ("a gem.", 1),
    ("dull and far too long.", 0),
    ("the cast is wonderful and the story moved me to tears.", 1),
    ("i wanted to leave after ten minutes.", 0),
    ("funny, warm and clever.", 1),
    ("a mess of a film with nothing to say about anything at all.", 0),
    ("worth seeing twice.", 1),
    ("flat.", 0),
)


def _setup_71() -> tuple[BertClassifier, dict[str, torch.Tensor]]:
    """A one-layer BertClassifier on the course vocabulary, dropout 0.1, and one padded batch of eight reviews."""
    tok = course_tokenizer()
    data = encode(tok, [text for text, _ in _REVIEWS_71], [label for _, label in _REVIEWS_71])
    features = [{"input_ids": ids, "label": label, "index": i}
                for i, (ids, label) in enumerate(zip(data.input_ids, data.labels, strict=True))]
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, pad_token_id=tok.pad_token_id,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                        initializer_range=0.2)  # wider than BERT's 0.02: the first gradient's norm is 3, so clipping acts
    return BertClassifier(config, seed=71), pad_batch(features, pad_token_id=tok.pad_token_id)


def _without_attention_mask(model, batch):
    return F.cross_entropy(model(batch["input_ids"]), batch["labels"])


def _on_the_cls_hidden_state(model, batch):
    hidden = model.last_hidden_state(batch["input_ids"], batch["attention_mask"])
    return F.cross_entropy(hidden[:, 0], batch["labels"])


def _on_probabilities(model, batch):
    return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]).softmax(-1), batch["labels"])


_STEP_71 = StepExercise(
    build=_setup_71,
    loss_fn=classification_loss,
    loss_name="finetune.classification_loss",
    loss_slips=(
        (_without_attention_mask,
         Text("the model was run without the attention mask, so every sentence attended to its padding: a batch padded "
              "to its longest sentence changes the shorter ones' logits. Pass batch['attention_mask'] to the model.",
              "运行模型时没有传入注意力掩码，于是每个句子都关注了自己的填充：一个按最长句子填充的批量"
              "会改变较短句子的 logits。把 batch['attention_mask'] 传给模型。")),
        (_on_the_cls_hidden_state,
         Text("the loss was taken on the [CLS] hidden state (its hidden-size numbers read as scores of as many "
              "classes), not on the classifier's logits: the pooler and the classifier never learn. Use model(input_ids, "
              "attention_mask), which ends in the classification head.",
              "损失是在 [CLS] 隐藏状态上计算的（把它隐藏维度那么多个数当成同样多个类别的分数），"
              "而不是在分类器的 logits 上：池化层和分类器永远学不到东西。用 model(input_ids, attention_mask)，"
              "它以分类头结束。")),
        (_on_probabilities,
         Text("the loss was taken on probabilities (softmax of the logits): F.cross_entropy applies log-softmax itself, "
              "so pass it the logits.",
              "损失是在概率（logits 的 softmax）上计算的：F.cross_entropy 自己会做 log-softmax，"
              "所以要把 logits 传给它。")),
    ),
    fall=0.3,
)


def _solution_71():
    import torch.nn.functional as F

    def my_finetune_step(model, batch, optimizer, scheduler):
        model.train()  # dropout on: the model may come from an evaluation, in eval mode
        logits = model(batch["input_ids"], batch["attention_mask"])  # (batch, classes); the mask hides padding
        loss = F.cross_entropy(logits, batch["labels"])  # mean −log p(true class) over the sentences
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        return loss

    return my_finetune_step


register(Exercise(
    id="07.1",
    text=(Text("Write my_finetune_step(model, batch, optimizer, scheduler) -> loss: one fine-tuning step of the course's "
                 "BertClassifier (forward(input_ids, attention_mask) -> (batch, classes) logits) on a padded batch from "
                 "finetune.pad_batch (input_ids, attention_mask, labels): cross-entropy of the logits against the labels, "
                 "backward, clip the gradient norm to 1.0, the optimiser's step, the scheduler's step, zero the "
                 "gradients; return the loss. Checked against steps.training_step with finetune.classification_loss on a "
                 "copy of the same model (which comes in eval mode), with the same dropout masks: the same loss, the "
                 "same clipped gradients and learning rate for 3 steps, and a loss that falls over 20.",
                 "编写 my_finetune_step(model, batch, optimizer, scheduler) -> loss：课程的 BertClassifier"
                 "（forward(input_ids, attention_mask) -> (batch, classes) 的 logits）在一个来自 finetune.pad_batch 的"
                 "填充批量（input_ids、attention_mask、labels）上的一个微调步：logits 对标签的交叉熵，反向传播，"
                 "把梯度范数裁剪到 1.0，优化器的一步，调度器的一步，把梯度清零；返回损失。对照 steps.training_step "
                 "和 finetune.classification_loss 在同一模型的副本上检查（模型以 eval 模式传入），dropout 掩码相同："
                 "前 3 步的损失、裁剪后的梯度和学习率都相同，并且损失在 20 步内下降。")),
    grade=partial(grade_step, _STEP_71),
    solution=_solution_71,
    wrong_answers=(
        slipped_step(_without_attention_mask, "my_finetune_step_without_attention_mask"),
        slipped_step(classification_loss, "my_finetune_step_without_zero_grad", zero_grad=False),
        slipped_step(classification_loss, "my_finetune_step_without_clipping", clip="none"),
        slipped_step(_on_the_cls_hidden_state, "my_finetune_step_on_the_cls_hidden_state"),
        slipped_step(_on_probabilities, "my_finetune_step_on_probabilities"),
        slipped_step(classification_loss, "my_finetune_step_without_train_mode", train=False),
    ),
))

# ---- 07.2: accuracy and F1 from a confusion matrix -------------------------------------------------------------
_CONFUSION_72 = [[40, 10], [5, 45]]  # rows: true negative / positive; columns: predicted negative / positive
_ACC_72, _F1_72 = 85 / 100, 2 * 45 / (2 * 45 + 10 + 5)
_GRADE_F1_72, _WRONG_F1_72 = numeric_grader(
    "07.2", _F1_72,
    wrong={
        2 * 40 / (2 * 40 + 5 + 10):
            Text("that is the F1 of the negative class; F1 here is for the positive class (row 1, column 1 = 45).",
                 "这是负类的 F1；这里的 F1 针对正类（第 1 行第 1 列 = 45）。"),
        (45 / 55, 45 / 50):
            Text("that is precision (45/55) or recall (45/50) alone; F1 is their harmonic mean, 2·TP / (2·TP + FP + FN).",
                 "这只是精确率（45/55）或召回率（45/50）；F1 是它们的调和平均，2·TP / (2·TP + FP + FN)。"),
        (45 / 55 + 45 / 50) / 2:
            Text("the arithmetic mean of precision and recall is not F1: use the harmonic mean, 2PR / (P + R).",
                 "精确率和召回率的算术平均不是 F1：用调和平均，2PR / (P + R)。"),
    },
    fallback=Text("F1 of the positive class = 2·TP / (2·TP + FP + FN) with TP = 45, FP = 10, FN = 5.",
                  "正类的 F1 = 2·TP / (2·TP + FP + FN)，其中 TP = 45，FP = 10，FN = 5。"),
    rel_tol=1e-9, abs_tol=1e-3,  # math.isclose's default rel_tol
)


def _grade_72(answer) -> Text | None:
    accuracy, f1 = (float(x) for x in answer)
    if not math.isclose(accuracy, _ACC_72, abs_tol=1e-3):
        return Text("accuracy is the diagonal over everything: (40 + 45) / 100.",
                    "准确率是对角线除以全部：(40 + 45) / 100。")
    return _GRADE_F1_72(f1)


register(Exercise(
    id="07.2",
    text=(Text(f"Confusion matrix {_CONFUSION_72} (rows = true negative/positive, columns = predicted). Give "
                 "(accuracy, F1 of the positive class).",
                 f"混淆矩阵 {_CONFUSION_72}（行 = 真实的负类/正类，列 = 预测）。给出"
                 "（准确率，正类的 F1）。")),
    grade=_grade_72,
    solution=lambda: (_ACC_72, _F1_72),
    wrong_answers=(*((_ACC_72, f1) for f1 in _WRONG_F1_72), (0.45, _F1_72)),
))

# ---- 07.3: the head by hand ---------------------------------------------------------------------------------------


def _tiny_classifier():
    """A tiny course ``BertClassifier``, the class section 3 shows (``model.pooler``, ``model.classifier``)."""
    from transformers import BertConfig

    from mlm_course.bert import BertClassifier

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    return BertClassifier(config, num_labels=2, seed=6).eval()


def _grade_73(fn) -> Text | None:
    model = _tiny_classifier()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (3, 7), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids[:, 0] = 2
    with torch.no_grad():
        hidden = model.last_hidden_state(ids, mask)
        expected = model(ids, mask)
        got = torch.as_tensor(fn(hidden, model))
    if got.shape != expected.shape:
        return Text(f"return logits of shape (batch, num_labels) = {tuple(expected.shape)}, got {tuple(got.shape)}.",
                    f"返回形状为 (batch, num_labels) = {tuple(expected.shape)} 的 logits，而你的是 {tuple(got.shape)}。")
    if torch.allclose(got, expected, atol=1e-5):
        return None
    return next((hint for wrong, hint in _WRONG_73 if torch.allclose(got, wrong(hidden, model), atol=1e-5)),
                Text("logits = classifier(tanh(pooler.dense(hidden_states[:, 0]))) (dropout is off in eval mode).",
                     "logits = classifier(tanh(pooler.dense(hidden_states[:, 0])))（在 eval 模式下 dropout 关闭）。"))


def _solution_73():
    def head(hidden_states, model):
        pooled = torch.tanh(model.pooler.dense(hidden_states[:, 0]))
        return model.classifier(pooled)

    return head


_WRONG_73 = (  # (a common wrong head, its hint)
    (lambda h, m: m.classifier(h[:, 0]),
     Text("BERT's head first passes h_[CLS] through the pooler: tanh(pooler.dense(h)). You skipped it.",
          "BERT 的头先让 h_[CLS] 经过池化层：tanh(pooler.dense(h))。你跳过了它。")),
    (lambda h, m: m.classifier(torch.tanh(m.pooler.dense(h.mean(1)))),
     Text("the pooler reads the [CLS] position only (hidden_states[:, 0]), not the mean over tokens.",
          "池化层只读 [CLS] 位置（hidden_states[:, 0]），而不是词元上的平均。")),
    (lambda h, m: m.classifier(m.pooler.dense(h[:, 0])), Text("the pooler ends with tanh: tanh(pooler.dense(h_[CLS])).",
                                                              "池化层以 tanh 结束：tanh(pooler.dense(h_[CLS]))。")),
)

register(Exercise(
    id="07.3",
    text=(Text("Write head(hidden_states, model) -> logits: the head of the course's BertClassifier (model.pooler, "
                 "model.classifier; section 3) from the encoder's last hidden states (batch, seq, hidden), in eval mode.",
                 "编写 head(hidden_states, model) -> logits：课程的 BertClassifier 的头（model.pooler、"
                 "model.classifier；第 3 节），输入是编码器最后的隐藏状态 (batch, seq, hidden)，在 eval 模式下。")),
    grade=_grade_73,
    solution=_solution_73,
    wrong_answers=tuple(wrong for wrong, _ in _WRONG_73),
))

# ---- 07.4: length buckets -----------------------------------------------------------------------------------------
_LENGTHS_74 = torch.randint(3, 80, (1000,), generator=torch.Generator().manual_seed(64))


def _padding(batches, lengths) -> int:
    return sum(len(b) * int(lengths[b].max()) - int(lengths[b].sum()) for b in batches)


def _grade_74(fn) -> Text | None:
    lengths, batch_size = _LENGTHS_74.clone(), 16
    runs = []
    for seed in (0, 1, 0):
        batches = [[int(i) for i in b] for b in fn(lengths.clone(), batch_size, torch.Generator().manual_seed(seed))]
        runs.append(batches)
    batches = runs[0]
    flat = sorted(i for b in batches for i in b)
    if flat != list(range(len(lengths))):
        missing = len(lengths) - len(set(flat))
        return (Text(f"every example must appear exactly once per epoch ({missing} missing or some twice): keep the last, "
                     "smaller batch instead of dropping it.",
                     f"每个样本每轮必须恰好出现一次（{missing} 个缺失或有的出现两次）：保留最后那个较小的批量，"
                     "不要丢掉它。"))
    if any(len(b) > batch_size or not b for b in batches):
        return Text(f"each batch holds between 1 and {batch_size} examples.", f"每个批量有 1 到 {batch_size} 个样本。")
    random_batches = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(0)).split(batch_size)
    if _padding(batches, lengths) > 0.25 * _padding([b.tolist() for b in random_batches], lengths):
        return Text("batches mix short and long sentences: sort by length (within pools of many batches) before cutting.",
                    "批量里混着短句和长句：切分之前先（在由许多批量组成的池内）按长度排序。")
    if runs[0] == runs[1]:
        return (Text("a different generator seed gives the very same batches: shuffle (the pools and the batch order) "
                     "with the generator, or every epoch sees the same batches in the same order.",
                     "换一个 generator 的随机种子却得到完全相同的批量：用 generator 打乱（池和批量顺序），"
                     "否则每一轮都以相同的顺序看到相同的批量。"))
    if runs[0] != runs[2]:
        return Text("the same seed must give the same batches: draw every random number from the generator you are given.",
                    "相同的随机种子必须得到相同的批量：每个随机数都从传给你的 generator 中抽取。")
    return None


def _solution_74():
    def bucket_batches(lengths, batch_size, generator):
        order = torch.randperm(len(lengths), generator=generator)
        pool = 50 * batch_size
        batches = []
        for begin in range(0, len(order), pool):
            chunk = order[begin:begin + pool]
            chunk = chunk[lengths[chunk].argsort(descending=True)]
            batches += list(chunk.split(batch_size))
        return [batches[i] for i in torch.randperm(len(batches), generator=generator)]

    return bucket_batches


def _sorted_only(lengths, batch_size, generator):
    return list(lengths.argsort().split(batch_size))


def _random_batches(lengths, batch_size, generator):
    return list(torch.randperm(len(lengths), generator=generator).split(batch_size))


def _drop_last(lengths, batch_size, generator):
    order = lengths.argsort()
    batches = [b for b in order.split(batch_size) if len(b) == batch_size]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator)]


register(Exercise(
    id="07.4",
    text=(Text("Write bucket_batches(lengths, batch_size, generator) -> list of index lists: every example once, "
                 "batches of similar lengths (little padding), a different order for a different seed, no Python loop "
                 "over examples.",
                 "编写 bucket_batches(lengths, batch_size, generator) -> 下标列表组成的列表：每个样本恰好一次，"
                 "批量内长度相近（填充少），不同的随机种子给出不同的顺序，不用对样本的 Python 循环。")),
    grade=_grade_74,
    solution=_solution_74,
    wrong_answers=(_sorted_only, _random_batches, _drop_last),
))

# ---- 07.5: explain why MiniLM's lead does not measure masked-LM pretraining -----------------------------------------
multiple_choice(
    "07.5",
    Text("Fine-tuned with the same recipe, MiniLM-L6 reaches 83.7 % test accuracy and the course checkpoint 76.3 %. "
         "Why is this gap no evidence that masked-LM pretraining is what pays?",
         "用同样的配方微调，MiniLM-L6 的测试准确率达到 83.7 %，课程检查点是 76.3 %。"
         "为什么这个差距不能证明带来收益的是掩码语言模型预训练？"),
    {
        "a": Text("Because MiniLM differs in much more than the objective: it was distilled from a larger model, then "
                  "trained contrastively on about 1 B sentence pairs, with 15× the parameters.",
                  "因为 MiniLM 与课程模型的差别远不止目标函数：它从一个更大的模型蒸馏而来，"
                  "然后在约 1 B 个句子对上做对比训练，参数是课程模型的 15 倍。"),
        "b": Text("Because the gap is within the noise of a test set of 1,057 sentences: a 95 % interval at that size is "
                  "wider than the 7.4 points between the two models.",
                  "因为这个差距在 1,057 个句子的测试集的噪声之内：这个规模下的 95 % 区间比两个模型之间的 7.4 个百分点还宽。"),
        "c": Text("Because MiniLM was fine-tuned for more epochs than the course checkpoint, and the extra passes over "
                  "the labelled sentences, not anything it learned before, bought its lead.",
                  "因为 MiniLM 微调的轮数比课程检查点多，是在有标签句子上多出的那几遍，而不是它之前学到的任何东西，"
                  "让它领先。"),
        "d": Text("Because the test set was used to pick each model's best checkpoint, so 83.7 % is MiniLM's luckiest "
                  "test score, not a fair estimate of its accuracy.",
                  "因为测试集被用来为每个模型挑选最好的检查点，所以 83.7 % 是 MiniLM 最幸运的测试分数，"
                  "而不是对它准确率的公正估计。"),
    },
    "a",
    {
        "b": Text("one 95 % interval at 80 % accuracy on 1,057 sentences is about ±2.4 points (the dot plot's bars); 7.4 "
                  "points is far outside it. The gap is real; the question is what caused it.",
                  "在 1,057 个句子上、准确率 80 % 时，95 % 区间约为 ±2.4 个百分点（点图中的误差棒）；"
                  "7.4 个百分点远在其外。差距是真实的；问题是什么造成了它。"),
        "c": Text("it had fewer: one epoch against two (section 6 prints them), which can only have hurt MiniLM. Look at "
                  "how MiniLM itself was trained (section 3).",
                  "它的轮数更少：一轮对两轮（第 6 节打印了它们），这只可能拖 MiniLM 的后腿。"
                  "看看 MiniLM 本身是怎么训练的（第 3 节）。"),
        "d": Text("every model is chosen on dev and test is scored once (section 5), the same rule for all rows.",
                  "每个模型都在开发集上挑选，测试集只计分一次（第 5 节），所有行都用同一规则。"),
    },
)

# ---- 07.6: explain why MiniLM is at chance on zero-shot word order ----------------------------------------------------
multiple_choice(
    "07.6",
    Text("Zero-shot, the course checkpoint gives the real sentence the higher pseudo-log-likelihood in 96.0 % of the word-"
         "order test pairs; MiniLM-L6, a far stronger encoder, in 50.0 % (95 % interval 44.4-55.6 %). Why is MiniLM at "
         "chance?",
         "零样本时，课程检查点在 96.0 % 的词序测试对中给真实句子更高的伪对数似然；"
         "MiniLM-L6 这个强得多的编码器只有 50.0 %（95 % 区间 44.4-55.6 %）。为什么 MiniLM 处在随机水平？"),
    {
        "a": Text("Because MiniLM never read Austen or Wikipedia, so this 19th-century and encyclopaedic English is "
                  "foreign to it, and its word probabilities for it are poor.",
                  "因为 MiniLM 从没读过奥斯汀或维基百科，这种 19 世纪的英语和百科式的英语对它来说很陌生，"
                  "它给这些文本的词概率很差。"),
        "b": Text("Because MiniLM ships without a masked-LM head, so loading it as a masked LM initialises the head at "
                  "random: every PLL is noise, however good the encoder is.",
                  "因为 MiniLM 发布时没有掩码语言模型头，把它当作掩码语言模型加载时这个头是随机初始化的："
                  "不管编码器多好，每个伪对数似然都是噪声。"),
        "c": Text("Because PLL is biased towards short sentences, and MiniLM's tokenizer cuts the corrupted copies into "
                  "fewer pieces than the real ones, so they win about half the pairs.",
                  "因为伪对数似然偏向短句，而 MiniLM 的分词器把被打乱的副本切成的子词比真实句子少，"
                  "所以它们赢了大约一半的测试对。"),
        "d": Text("Because a 6-layer model is too shallow to represent word order: its attention cannot tell a sentence "
                  "from a shuffled copy of the same words.",
                  "因为 6 层的模型太浅，无法表示词序：它的注意力分不清一个句子和同样这些词打乱后的副本。"),
    },
    "b",
    {
        "a": Text("MiniLM's training text (its teacher's pretraining corpus, then about 1 B sentence pairs) is far larger "
                  "than ours and covers this English; and the fine-tuned rows show its encoder is strong. Ask what turns "
                  "its hidden states into the word probabilities that PLL adds up.",
                  "MiniLM 的训练文本（它老师的预训练语料，再加约 1 B 个句子对）比我们的大得多，也涵盖这种英语；"
                  "而微调那几行说明它的编码器很强。问问是什么把它的隐藏状态变成了伪对数似然要相加的词概率。"),
        "c": Text("a swap or a shuffle moves words without changing them, so both versions of a sentence have exactly the "
                  "same tokens and the same length: PLL compares like with like here.",
                  "交换或打乱只移动词而不改变它们，所以一个句子的两个版本有完全相同的词元和相同的长度："
                  "在这里伪对数似然比较的是同类。"),
        "d": Text("the course checkpoint has 2 layers and reaches 96.0 %. Depth is not the problem; look at the loading "
                  "report: which weights were missing?",
                  "课程检查点只有 2 层，却达到 96.0 %。深度不是问题；看看加载报告：缺了哪些权重？"),
    },
)

# ---- 07.7: write the mixed-precision step -----------------------------------------------------------------------


def _solution_77():
    import torch.nn.functional as F

    def my_amp_step(model, batch, optimizer, scheduler, scaler, device, dtype):
        batch = {name: tensor.to(device) for name, tensor in batch.items()}  # where the model's weights are
        with torch.autocast(device_type=device.type, dtype=dtype):  # matrix products in float16 (or bfloat16)
            logits = model(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits.float(), batch["labels"])  # the loss in float32
        scaler.scale(loss).backward()  # loss × scale: small gradients no longer underflow float16
        scaler.unscale_(optimizer)  # divide the gradients by the scale, note any inf or nan ...
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # ... so clipping sees the true norm
        scaler.step(optimizer)  # optimizer.step(), skipped if the gradients overflowed
        scaler.update()  # halve the scale after an overflow, grow it after a run of good steps
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return my_amp_step


register(Exercise(
    id="07.7",
    text=(Text("Write my_amp_step(model, batch, optimizer, scheduler, scaler, device, dtype) -> loss: one mixed-precision "
                 "step of the course's BertClassifier, as on a GPU. Move every tensor of the batch (on the CPU) to device "
                 "with .to(device); run the model on (input_ids, attention_mask) under torch.autocast(device_type="
                 "device.type, dtype=dtype); take the loss in float32, F.cross_entropy(logits.float(), labels) (as "
                 "finetune.classification_loss); scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip the "
                 "gradient norm to 1.0; scaler.step(optimizer); scaler.update(); scheduler.step(); "
                 "optimizer.zero_grad(set_to_none=True); return the loss. Checked on the CPU against a reference step on "
                 "copies of 07.1's model and batch: four float16 steps with GradScaler('cpu', init_scale=2**10, "
                 "growth_interval=1), the third with the scale set to 2**40 so that its gradients overflow (its update "
                 "must be skipped), then one bfloat16 step with a disabled scaler; the same logits dtype, loss, applied "
                 "gradients, learning rate and scale at every step.",
                 "编写 my_amp_step(model, batch, optimizer, scheduler, scaler, device, dtype) -> loss：课程的 BertClassifier "
                 "像在 GPU 上那样的一个混合精度训练步。用 .to(device) 把批量中（在 CPU 上的）每个张量移到 device；"
                 "在 torch.autocast(device_type=device.type, dtype=dtype) 下对 (input_ids, attention_mask) 运行模型；"
                 "用 float32 计算损失，F.cross_entropy(logits.float(), labels)（与 finetune.classification_loss 相同）；"
                 "scaler.scale(loss).backward()；scaler.unscale_(optimizer)；把梯度范数裁剪到 1.0；"
                 "scaler.step(optimizer)；scaler.update()；scheduler.step()；optimizer.zero_grad(set_to_none=True)；"
                 "返回损失。在 CPU 上对照参考训练步检查，用的是 07.1 的模型和批量的副本：先用 "
                 "GradScaler('cpu', init_scale=2**10, growth_interval=1) 做四步 float16，其中第三步把缩放因子设为 2**40，"
                 "使梯度溢出（必须跳过这一步的更新），然后用禁用的 scaler 做一步 bfloat16；每一步的 logits dtype、损失、"
                 "实际应用的梯度、学习率和缩放因子都要相同。")),
    grade=partial(grade_amp_step, _setup_71),
    solution=_solution_77,
    wrong_answers=(
        amp_slipped_step("my_amp_step_clipping_before_unscaling", clip="before unscale"),
        amp_slipped_step("my_amp_step_with_optimizer_step", scaler_step=False),
        amp_slipped_step("my_amp_step_without_update", update=False),
        amp_slipped_step("my_amp_step_on_the_unscaled_loss", scale=False),
        amp_slipped_step("my_amp_step_without_autocast", autocast=False),
        amp_slipped_step("my_amp_step_with_a_float16_loss", fp32_loss=False),
        amp_slipped_step("my_amp_step_without_zero_grad", zero_grad=False),
        amp_slipped_step("my_amp_step_without_moving_the_batch", move=False),
    ),
))
