"""Re-encrypt researchers' endpoint keys under the first of ENDPOINT_KEY_SECRETS."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from llm.keystore import endpoint_keys_rotate
from studies.analysis.rounding import counted


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored endpoint key under the first key of "
        "IDEAREVIEW_ENDPOINT_KEY_SECRETS (the others must still be listed to decrypt)."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            count = endpoint_keys_rotate()
        except Exception as exc:  # InvalidToken: a key none of the secrets opens
            raise CommandError(
                f"rotation stopped, nothing changed: {type(exc).__name__} {exc}. Keep every "
                "old secret in IDEAREVIEW_ENDPOINT_KEY_SECRETS, after the new one."
            ) from exc
        self.stdout.write(f"{counted(count, 'endpoint key')} re-encrypted under the first secret")
