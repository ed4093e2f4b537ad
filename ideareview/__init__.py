"""ideareview: blind expert-review studies of research ideas beside LLM judges."""

from .celery import app as celery_app

__all__ = ["celery_app"]
__version__ = "0.1.0"
