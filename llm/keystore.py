"""Researchers' own endpoint keys, encrypted at rest with Fernet (AES-128-CBC with an
HMAC-SHA256, from the `cryptography` package).

The keys that encrypt them come from settings.ENDPOINT_KEY_SECRETS (Fernet keys; the
first encrypts, every one decrypts), or, when that is empty, one key derived from
SECRET_KEY. Rotation: put a new key first, keep the old ones after it, run
`manage.py endpoint_keys_rotate` (every row is re-encrypted under the first key), then
drop the old ones.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import transaction

from .models import EndpointKey


class KeyUnreadable(Exception):
    """A stored key cannot be decrypted with the configured secrets."""


def _fernet() -> MultiFernet:
    secrets = list(settings.ENDPOINT_KEY_SECRETS)
    if not secrets:
        digest = hashlib.sha256(b"ideareview endpoint keys\0" + settings.SECRET_KEY.encode())
        secrets = [base64.urlsafe_b64encode(digest.digest()).decode()]
    return MultiFernet([Fernet(s.encode() if isinstance(s, str) else s) for s in secrets])


def endpoint_key_save(*, owner: Any, label: str, secret: str) -> EndpointKey:
    secret = secret.strip()
    if not secret:
        raise ValueError("the key is empty")
    token = _fernet().encrypt(secret.encode()).decode()
    hint = secret[-4:] if len(secret) >= 12 else ""
    return EndpointKey.objects.create(owner=owner, label=label.strip(), token=token, hint=hint)


def endpoint_key_value(key: EndpointKey) -> str:
    try:
        return _fernet().decrypt(key.token.encode()).decode()
    except InvalidToken as exc:
        raise KeyUnreadable(
            f"the stored key {key.label!r} cannot be decrypted with the configured "
            "ENDPOINT_KEY_SECRETS"
        ) from exc


def endpoint_keys_rotate() -> int:
    """Re-encrypt every stored key under the first secret; the number of keys."""
    fernet = _fernet()
    done = 0
    with transaction.atomic():
        for key in EndpointKey.objects.select_for_update().order_by("pk"):
            key.token = fernet.rotate(key.token.encode()).decode()
            key.save(update_fields=["token"])
            done += 1
    return done
