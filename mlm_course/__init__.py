"""mlm_course: the companion package of the masked-language-modelling course."""

import warnings

from mlm_course.settings import SETTINGS

# transformers imports tqdm.auto, which warns in Jupyter without ipywidgets; plain bars work fine there.
warnings.filterwarnings("ignore", message="IProgress not found")

__all__ = ["SETTINGS", "__version__"]
__version__ = "0.3.0"
