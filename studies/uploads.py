"""An uploaded file kept between "show me the problems" and "take the valid rows".

Idea files and invitation files follow one rule: a file with problems is read, its
problems are shown, and the file is kept (an ``IdeaUpload`` row, in the database every
machine shares) so that "import / invite the valid rows" needs no second upload. The form
sends either a new file or the id of the kept one; a kept file is deleted once its rows
are taken, and kept files older than ``KEEP`` are dropped when the study's next file is.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django import forms
from django.utils import timezone

from .models import IdeaUpload, Study

KEEP = timedelta(days=1)


class UploadGone(Exception):
    """The kept file a form names is not there (taken, dropped, or another study's)."""


class KeptUploadForm(forms.Form):
    """A new file, or the id of one kept before; `max_bytes` bounds a new file."""

    max_bytes: int | None = None

    file = forms.FileField(required=False)
    staged = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("file")
        if upload is None and not data.get("staged"):
            raise forms.ValidationError("Choose a file to upload.")
        if upload is not None and self.max_bytes and upload.size > self.max_bytes:
            raise forms.ValidationError(f"{upload.name}: larger than {self.max_bytes} bytes")
        return data


def upload_keep(*, study: Study, name: str, data: bytes, actor: Any = None) -> IdeaUpload:
    """Keep a new file of the study's (and drop its kept files past `KEEP`)."""
    IdeaUpload.objects.filter(study=study, created_at__lt=timezone.now() - KEEP).delete()
    return IdeaUpload.objects.create(
        study=study,
        name=name,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        created_by=actor if getattr(actor, "pk", None) else None,
    )


def upload_from_form(*, study: Study, cleaned: dict[str, Any], actor: Any) -> IdeaUpload:
    """The file a valid `KeptUploadForm` names: the new one, kept, or the one kept before."""
    upload = cleaned.get("file")
    if upload is not None:
        return upload_keep(study=study, name=upload.name, data=upload.read(), actor=actor)
    kept = IdeaUpload.objects.filter(study=study, pk=cleaned["staged"]).first()
    if kept is None:
        raise UploadGone(
            f"the file read before is no longer kept (files are kept for {KEEP.days} day): "
            "upload it again"
        )
    return kept
