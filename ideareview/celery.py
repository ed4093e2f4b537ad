"""The Celery app. Tasks are thin: they take ids and call services (docs/architecture.md, "Background jobs")."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")

app = Celery("ideareview")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
