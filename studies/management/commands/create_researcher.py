"""Create a researcher account (or make an existing account a researcher).

    python manage.py create_researcher ada --email ada@example.org
    python manage.py create_researcher ada --password-file secret.txt

Researchers may create studies (the studies.add_study permission, through the
Researchers group). Without --password or --password-file the password is asked for.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from studies.services.study import researcher_grant


class Command(BaseCommand):
    help = "Create a researcher (who may create studies), or grant an existing user the role."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--password", help="visible in the process list; prefer a prompt")
        group.add_argument("--password-file", type=Path, help="first line is the password")

    def handle(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        username = opts["username"].strip()
        if not username:
            raise CommandError("the username is empty")
        user = User.objects.filter(username=username).first()
        password = self._password(opts, needed=user is None)
        with transaction.atomic():
            if user is None:
                user = User(username=username, email=opts["email"].strip())
                self._validate(password or "", user)
                user.set_password(password)
                user.save()
                verb = "created"
            else:
                if opts["email"]:
                    user.email = opts["email"].strip()
                if password:
                    self._validate(password, user)
                    user.set_password(password)
                user.save()
                verb = "updated"
            researcher_grant(user=user)
        self.stdout.write(f"researcher {username} {verb}; they may now create studies")

    def _password(self, opts: dict[str, Any], *, needed: bool) -> str | None:
        if opts["password"]:
            return str(opts["password"])
        if opts["password_file"]:
            try:
                return opts["password_file"].read_text().splitlines()[0]
            except (OSError, IndexError) as exc:
                raise CommandError(f"--password-file: cannot read a password ({exc})") from None
        if not needed:
            return None
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the two passwords differ")
        return first

    def _validate(self, password: str, user: Any) -> None:
        try:
            password_validation.validate_password(password, user)
        except ValidationError as exc:
            raise CommandError("password refused: " + " ".join(exc.messages)) from None
