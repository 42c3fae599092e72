"""Fine-tuning a BERT for sentence classification: data → length buckets → an Accelerate loop → metrics.

* :mod:`~mlm_course.finetune.classifier` — :func:`load_classifier`: ``AutoModelForSequenceClassification`` from
  any name :func:`mlm_course.models.resolve` understands (``"course"``, ``"minilm"``, a folder, a hub name with
  ``allow_hub=True``), or ``"random:<config>"`` for the same architecture with fresh weights (the "no pretraining"
  baseline); :func:`head_by_hand` — the classification head written out.
* :mod:`~mlm_course.finetune.data` — :func:`encode`, :func:`sentiment_data`: token ids without padding;
  :class:`LengthBucketSampler` + :func:`pad_batch`: batches of similar lengths, each padded only to its own longest.
* :mod:`~mlm_course.finetune.loop` — :func:`fit`: the course's one training loop
  (:class:`mlm_course.lab.runner.TrainLoop`: AdamW, warm-up/decay, clipping, accumulation, mixed precision, several
  processes through ``accelerate launch``) on length-bucketed batches; evaluates on dev, keeps the best weights,
  stops early.
* :mod:`~mlm_course.finetune.metrics` — :func:`evaluate`, :func:`classification_metrics`,
  :func:`most_confident_errors`, :func:`predict`: what the notebook measures; :func:`bag_of_words_baseline`: TF-IDF +
  logistic regression.
* :mod:`~mlm_course.finetune.runner` — :func:`run`: load, fit, evaluate on dev and test, write ``results.json``:
  what the CLI and the comparison call.
* :mod:`~mlm_course.finetune.display` — :func:`first_available`, :func:`comparison_table`: what notebook 07 shows.

Every name is importable from ``mlm_course.finetune`` itself.
"""

from mlm_course.finetune.classifier import LABEL_NAMES, RANDOM_PREFIX, head_by_hand, load_classifier
from mlm_course.finetune.data import (
    MIN_MAX_LENGTH,
    Encoded,
    LengthBucketSampler,
    RunBatches,
    encode,
    make_loader,
    pad_batch,
    sentiment_data,
    subset,
)
from mlm_course.finetune.display import comparison_table, first_available
from mlm_course.finetune.loop import (
    BEST_DIR,
    PRECISIONS,
    FinetuneConfig,
    FitResult,
    describe_accelerator,
    fit,
    make_accelerator,
    padding_multiple,
)
from mlm_course.finetune.metrics import (
    EvalResult,
    Predictions,
    bag_of_words_baseline,
    classification_metrics,
    evaluate,
    logistic_regression_on_dev,
    most_confident_errors,
    predict,
)
from mlm_course.finetune.runner import RESULTS_FILE, RunResult, _short, hardware, run

__all__ = [
    "BEST_DIR", "LABEL_NAMES", "MIN_MAX_LENGTH", "PRECISIONS", "RANDOM_PREFIX", "RESULTS_FILE",
    "Encoded", "EvalResult", "FinetuneConfig", "FitResult", "LengthBucketSampler", "Predictions", "RunBatches",
    "RunResult", "bag_of_words_baseline", "classification_metrics", "comparison_table", "most_confident_errors",
    "describe_accelerator", "encode", "evaluate", "first_available", "fit", "hardware", "head_by_hand",
    "load_classifier", "logistic_regression_on_dev", "make_accelerator", "make_loader", "pad_batch",
    "padding_multiple", "predict", "run", "sentiment_data", "subset",
    "_short",  # scripts/finetune_comparison.py rounds its rows with it
]
