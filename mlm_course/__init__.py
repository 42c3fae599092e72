"""mlm_course: the companion package of the masked-language-modelling course."""

__all__ = ["__version__"]
__version__ = "0.3.0"
