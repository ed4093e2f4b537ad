"""Where report files live: the "reports" storage of ``settings.STORAGES``.

Report files are written and read only through Django's storage API, so that several
web and worker machines can share one store (an S3-compatible bucket through
django-storages, or a folder on NFS). docs/deploy.md says how to configure it.

A report's files sit under ``<study slug>/<version>/`` in that storage; the
``StudyReport`` row names the version folder once every file is saved (see
``studies.report_files``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.utils.functional import cached_property

REPORTS = "reports"


class ReportsFolderStorage(FileSystemStorage):
    """The default "reports" storage: a folder, ``settings.REPORTS_ROOT`` unless a
    ``location`` is given. The setting is read when the storage is first used (and again
    after it changes), like ``FileSystemStorage`` does with ``MEDIA_ROOT``."""

    def __init__(self, location: str | None = None, **options: Any) -> None:
        super().__init__(location=location, **options)
        self._folder = location

    @cached_property
    def base_location(self) -> Any:
        return self._folder if self._folder is not None else settings.REPORTS_ROOT

    def _clear_cached_properties(self, setting: Any, **kwargs: Any) -> None:
        super()._clear_cached_properties(setting, **kwargs)
        if setting == "REPORTS_ROOT":
            self.__dict__.pop("base_location", None)
            self.__dict__.pop("location", None)


def reports_storage() -> Storage:
    return storages[REPORTS]


def storage_folder_remove(storage: Storage, folder: str) -> None:
    """Delete every file under `folder` (and, where the storage has them, its folders)."""
    try:
        folders, files = storage.listdir(folder)
    except FileNotFoundError:
        return
    for sub in folders:
        storage_folder_remove(storage, f"{folder}/{sub}")
    for name in files:
        storage.delete(f"{folder}/{name}")
    # A folder of a file system (or a node of the in-memory storage); object stores
    # have no folders, and deleting a missing key is no error there.
    storage.delete(folder)


def report_file_open(version: str, name: str) -> File | None:
    """One file of a report version, opened for reading from the reports storage, or
    None when it is not there (a row from another deployment, or a name outside it)."""
    storage = reports_storage()
    path = f"{version}/{name}"
    try:
        if not version or not storage.exists(path):
            return None
        return storage.open(path, "rb")
    except (FileNotFoundError, SuspiciousFileOperation):
        return None
