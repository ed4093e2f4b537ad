"""The session store: Django's cached_db (read from the cache, written through to the
database), with a login's new session written once instead of three times.

At a login Django gives the session a new key (cycle_key, against session fixation): it
draws a key and asks the cache and the database whether it is taken, inserts an empty
row under it, and the response then writes the logged-in session over that row. Here the
new key is drawn when the response saves the session, and that save inserts the row with
its data, the database's primary key refusing a key already taken (then another is
drawn, as Django's create() does). The old session is deleted at once, as Django deletes
it; what the browser receives is the same: a new key, holding the logged-in session.
"""

from __future__ import annotations

from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.cached_db import SessionStore as CachedDBStore
from django.utils.crypto import get_random_string


class SessionStore(CachedDBStore):
    def _get_new_session_key(self) -> str:
        # No look-up first: save(must_create=True) inserts, and a key in use fails the
        # primary key, which create() answers by drawing another.
        return get_random_string(32, VALID_KEY_CHARS)

    def cycle_key(self) -> None:
        """A new key for the same data, drawn (and the row inserted) when the session is
        saved; the old session is deleted now."""
        data = self._session  # type: ignore[attr-defined]
        key = self.session_key
        self._session_key = None
        self._session_cache = data
        self.modified = True
        if key:
            self.delete(key)
