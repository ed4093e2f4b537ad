"""The Celery app. Tasks are thin: they take ids and call services (docs/architecture.md, "Background jobs")."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
# Celery's Django fix-up runs Django's system checks at every worker start unless this is
# set. The checks import every URLconf, so every view module and with them the analysis
# libraries, which a worker otherwise loads only in the task that needs them: that more
# than doubled the CPU of a worker's start. Deployments run the checks where they start
# (`migrate` in `make serve`), not in each worker.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("ideareview")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
