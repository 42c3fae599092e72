"""mlm_course: the companion package of the masked-language-modelling course."""

from mlm_course.lab.settings import SETTINGS

__all__ = ["SETTINGS", "__version__"]
__version__ = "0.3.0"
