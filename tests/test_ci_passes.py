"""Which tests each of CI's two passes runs (tests/conftest.py): a browser walk runs in the
production pass only, a database-free test in the embedded pass only, a database test in
the production pass only unless it is marked `embedded` (then in both); a misspelt pass
name stops the run instead of quietly running nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.conftest import pytest_collection_modifyitems


@dataclass
class FakeItem:
    name: str
    fixturenames: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


@dataclass
class FakeConfig:
    deselected: list[str] = field(default_factory=list)

    @property
    def hook(self) -> FakeConfig:
        return self

    def pytest_deselected(self, items: list[FakeItem]) -> None:
        self.deselected += [i.name for i in items]


def items() -> list[FakeItem]:
    return [
        FakeItem("statistics"),
        FakeItem("r cross-check", markers=("r",)),
        FakeItem("page", fixturenames=("client", "db")),
        FakeItem("worker", fixturenames=("transactional_db",)),
        FakeItem("marked", markers=("django_db",)),
        FakeItem("browser", fixturenames=("live_server",), markers=("e2e",)),
        FakeItem("broker faults", fixturenames=("transactional_db",), markers=("embedded",)),
        FakeItem("embedded, no database", markers=("embedded",)),
    ]


@pytest.mark.parametrize(
    ("test_pass", "kept"),
    [
        (
            "",
            [
                "statistics",
                "r cross-check",
                "page",
                "worker",
                "marked",
                "browser",
                "broker faults",
                "embedded, no database",
            ],
        ),
        (
            "embedded",
            ["statistics", "r cross-check", "broker faults", "embedded, no database"],
        ),
        ("production", ["page", "worker", "marked", "browser", "broker faults"]),
    ],
)
def test_each_pass_keeps_the_tests_whose_outcome_can_differ(monkeypatch, test_pass, kept):
    monkeypatch.setenv("IDEAREVIEW_TEST_PASS", test_pass)
    collected, config = items(), FakeConfig()
    pytest_collection_modifyitems(config, collected)  # type: ignore[arg-type]
    assert [i.name for i in collected] == kept
    assert sorted(config.deselected) == sorted({i.name for i in items()} - set(kept))


def test_an_unknown_pass_name_is_an_error(monkeypatch):
    monkeypatch.setenv("IDEAREVIEW_TEST_PASS", "postgres")
    with pytest.raises(pytest.UsageError, match="embedded, production"):
        pytest_collection_modifyitems(FakeConfig(), items())  # type: ignore[arg-type]


def test_a_fresh_clone_orders_tests_by_the_committed_durations():
    """Without a recorded run (CI's clean clone) the scheduler reads tests/durations.json:
    every id there names a test module that exists, and a test it knows is expected to
    take what it says, not the marks' guess."""
    from tests.conftest import ROOT, _committed_durations, _guessed_seconds

    committed = _committed_durations()
    assert len(committed) > 100
    assert all((ROOT / nodeid.split("::", 1)[0]).exists() for nodeid in committed)
    longest = max(committed, key=committed.__getitem__)
    assert _guessed_seconds(longest) == committed[longest] > 8.0
    assert _guessed_seconds("tests/test_no_such_module.py::test_x") == 0.3
