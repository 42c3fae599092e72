"""The figures the notebooks show. Each function returns a matplotlib Figure (testable without a display).

One module per notebook (``why_log``, ``tokens``, ``masking``, ``inside_bert``, ``objective``, ``pretraining``,
``fine_tuning``, ``ablations``, ``chinese``), ``style``: the Okabe–Ito palette, the colour helpers,
:func:`figure_rule_violations` and :func:`layout_problems` (overlapping texts, legends over data, cut markers),
and ``language``: every figure in English or, for the 中文版, in Chinese. Every public name is imported here, so
``plots.mask_grid(...)`` works.
"""

from mlm_course.plots.ablations import (
    ABLATION_METRICS,
    ACTION_GROUPS,
    ablation_loss_by_action,
    ablation_panels,
)
from mlm_course.plots.chinese import hit_rate_bars
from mlm_course.plots.fine_tuning import (
    DOMAIN_NAMES,
    PAYOFF_MODELS,
    ZERO_SHOT_NAMES,
    comparison_dots,
    confusion_matrix_plot,
    finetune_curves,
    label_efficiency_curves,
    label_efficiency_differences,
    zero_shot_word_order,
)
from mlm_course.plots.inside_bert import (
    BERT_PART_COLORS,
    BERT_PART_LABELS,
    attention_heads,
    parameters_by_part,
)
from mlm_course.plots.language import (
    LANGUAGE_ENV_VAR,
    UntranslatedFigureText,
    figure_language,
    localise,
    use_cjk_font,
)
from mlm_course.plots.masking import (
    MASK_GRID_COLORS,
    distinct_masks_plot,
    mask_grid,
    masks_per_sequence_hist,
    rates_vs_targets,
)
from mlm_course.plots.objective import (
    ACTION_METRIC_LABELS,
    joint_vs_product,
    loss_by_action_bars,
    pll_pairs_plot,
    training_loss_curves,
)
from mlm_course.plots.pretraining import (
    TIME_TO_LOSS_ABLATIONS,
    TIME_TO_LOSS_RECIPES,
    accuracy_by_frequency,
    fill_mask_bars,
    lunch_break_curves,
    pretraining_curves,
    time_to_loss_curves,
)
from mlm_course.plots.style import (
    DTYPE_COLORS,
    OKABE_ITO,
    SERIES_COLORS,
    figure_rule_violations,
    layout_problems,
    text_colour_on,
)
from mlm_course.plots.tokens import pieces_per_word_dots
from mlm_course.plots.why_log import (
    gd_vs_counts,
    linear_vs_log_distance,
    loss_gradients,
    token_log_prob_bars,
    underflow_curves,
)

__all__ = [
    # style, language
    "OKABE_ITO", "DTYPE_COLORS", "SERIES_COLORS", "figure_rule_violations", "layout_problems", "text_colour_on",
    "LANGUAGE_ENV_VAR", "figure_language", "localise", "use_cjk_font", "UntranslatedFigureText",
    # 01_why_log
    "token_log_prob_bars", "underflow_curves", "gd_vs_counts", "loss_gradients", "linear_vs_log_distance",
    # 02_tokens
    "pieces_per_word_dots",
    # 03_masking
    "MASK_GRID_COLORS", "mask_grid", "masks_per_sequence_hist", "rates_vs_targets", "distinct_masks_plot",
    # 04_inside_bert
    "BERT_PART_COLORS", "BERT_PART_LABELS", "attention_heads", "parameters_by_part",
    # 05_objective
    "ACTION_METRIC_LABELS", "joint_vs_product", "loss_by_action_bars", "training_loss_curves", "pll_pairs_plot",
    # 06_pretraining
    "pretraining_curves", "fill_mask_bars", "accuracy_by_frequency", "TIME_TO_LOSS_RECIPES", "TIME_TO_LOSS_ABLATIONS",
    "lunch_break_curves",
    "time_to_loss_curves",
    # 07_fine_tuning
    "PAYOFF_MODELS", "confusion_matrix_plot", "finetune_curves", "comparison_dots", "label_efficiency_curves",
    "label_efficiency_differences", "zero_shot_word_order", "ZERO_SHOT_NAMES", "DOMAIN_NAMES",
    # 08_ablations
    "ABLATION_METRICS", "ACTION_GROUPS", "ablation_panels", "ablation_loss_by_action",
    # 10_chinese_masking
    "hit_rate_bars",
]
