"""The errors a study's setup refuses with, in a module of their own: the accounts app's
hooks (`studies.team_accounts`) raise them without loading the study services."""

from __future__ import annotations


class SetupError(ValueError):
    """A setting or team change that is refused; the message says why."""


class NoAccountError(SetupError):
    """The team change names an address no account uses (an owner may invite it)."""


class ImportedStudyRefused(SetupError):
    """A study of imported reviews was reviewed elsewhere: it cannot invite, remind,
    screen, assign, pay or take platform participants. ``what`` completes the sentence
    ("sends no reminders")."""

    def __init__(self, what: str) -> None:
        super().__init__(
            "This study holds reviews imported from a file: the reviewing happened elsewhere "
            f"and is over, so it {what}."
        )
