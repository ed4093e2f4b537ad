"""What accounts asks of the apps above it, which register an implementation in their
`ready()`: this app imports none of them.

- A team joiner: an invitation sent from a study's team page carries the study's id and
  a role as plain values; on acceptance the registered joiner adds the new researcher.
- Handovers: deactivating a researcher hands what they own to a successor; each
  registered handover says what the user owns (for the page) and hands it over (inside
  the deactivation's transaction, writing its own audit records).
"""

from __future__ import annotations

from typing import Any, Protocol


class TeamJoiner(Protocol):
    def __call__(self, *, team_id: int, role: str, user: Any, invited_by: Any) -> None: ...


class OwnershipHandover(Protocol):
    def owned(self, user: Any) -> list[str]:
        """Labels of what the user owns (shown before deactivating them)."""
        ...

    def hand_over(self, *, user: Any, successor: Any, actor: Any) -> int:
        """Make `successor` the owner of what `user` owns; the number handed over."""
        ...


_team_joiners: list[TeamJoiner] = []
_handovers: list[OwnershipHandover] = []


def team_joiner_register(joiner: TeamJoiner) -> None:
    if joiner not in _team_joiners:
        _team_joiners.append(joiner)


def handover_register(handover: OwnershipHandover) -> None:
    if handover not in _handovers:
        _handovers.append(handover)


def team_joiners() -> list[TeamJoiner]:
    return list(_team_joiners)


def handovers() -> list[OwnershipHandover]:
    return list(_handovers)
