"""Fine-tuning a BERT for sentence classification, the lesson of notebook 07.

* :mod:`~mlm_course.finetune.classifier` — :func:`load_classifier`: the course's :class:`~mlm_course.bert.BertClassifier`
  from any name :func:`mlm_course.models.resolve` understands (``"course"``, ``"minilm"``, a folder, a hub name with
  ``allow_hub=True``), or ``"random:<size>"`` for the same architecture with fresh weights (the "no pretraining"
  baseline); :func:`classification_loss`, the loss of the training step; :func:`head_by_hand`, the head written out.
* :mod:`~mlm_course.finetune.data` — :func:`encode`, :func:`sentiment_data`: token ids without padding;
  :class:`LengthBucketSampler` + :func:`pad_batch`: batches of similar lengths, each padded only to its own longest;
  :func:`training_batches`: endless such batches for :func:`mlm_course.train.train`.
* :mod:`~mlm_course.finetune.metrics` — :func:`evaluate`, :func:`score`, :func:`classification_metrics`,
  :func:`most_confident_errors`, :func:`predict`, :func:`prediction_string`; :func:`bag_of_words_baseline`: TF-IDF +
  logistic regression.
* :mod:`~mlm_course.finetune.display` — :func:`first_available`, :func:`comparison_table`: what notebook 07 shows.

Notebook 07 fine-tunes with the loop of :mod:`mlm_course.train`; the command line's runs (``mlm-course finetune``,
early stopping, run files) are in :mod:`mlm_course.lab.finetune_run`. Every name here is importable from
``mlm_course.finetune`` itself.
"""

from mlm_course.finetune.classifier import (
    LABEL_NAMES,
    RANDOM_PREFIX,
    classification_loss,
    head_by_hand,
    load_classifier,
)
from mlm_course.finetune.data import (
    MIN_MAX_LENGTH,
    Encoded,
    LengthBucketSampler,
    encode,
    make_loader,
    pad_batch,
    sentiment_data,
    subset,
    training_batches,
)
from mlm_course.finetune.display import comparison_table, first_available
from mlm_course.finetune.metrics import (
    EvalResult,
    Predictions,
    bag_of_words_baseline,
    classification_metrics,
    evaluate,
    logistic_regression_on_dev,
    most_confident_errors,
    predict,
    prediction_string,
    score,
)

__all__ = [
    "LABEL_NAMES", "MIN_MAX_LENGTH", "RANDOM_PREFIX", "Encoded", "EvalResult", "LengthBucketSampler", "Predictions",
    "bag_of_words_baseline", "classification_loss", "classification_metrics", "comparison_table", "encode",
    "evaluate", "first_available", "head_by_hand", "load_classifier", "logistic_regression_on_dev",
    "make_loader", "most_confident_errors", "pad_batch", "predict", "prediction_string", "score", "sentiment_data",
    "subset", "training_batches",
]
