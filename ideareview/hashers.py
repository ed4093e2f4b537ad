"""The password hasher new passwords get: Argon2id with the parameters of OWASP's
password storage guidance (19 MiB of memory, 2 passes, 1 lane) instead of Django's
(100 MiB, 2 passes, 8 lanes).

Why not Django's: on a small server a login's hash is paid in CPU while every other
request waits for it, and Django's Argon2 parameters cost nearly as much CPU as its
PBKDF2 (docs/measurements.md has both, measured here), so a morning's burst of reviewer
logins would still starve autosaves. OWASP lists these parameters as one of the
equivalent minimum configurations for Argon2id; the memory they need per guess is what
makes guessing on GPUs dear, and they need 19 MiB per login in flight instead of 100.

A hash made with other parameters (Django's, or older ones) still verifies, since each
hash records its own, and Django re-hashes it with these at the user's next login.
"""

from __future__ import annotations

from django.contrib.auth.hashers import Argon2PasswordHasher


class Argon2idHasher(Argon2PasswordHasher):
    time_cost = 2
    memory_cost = 19 * 1024  # KiB
    parallelism = 1
