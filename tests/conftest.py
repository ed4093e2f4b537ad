"""Shared fixtures: the personas of DESIGN.md and the si2024 files."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

ROOT = Path(__file__).resolve().parents[1]
SI2024 = ROOT / "data" / "si2024"
SI_REVIEWS = SI2024 / "ideation_reviews.json"
SI_TITLES = SI2024 / "idea_titles.csv"
METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def other_researcher(db):
    return get_user_model().objects.create_user("other", password="other-pass-123")


@pytest.fixture
def si2024_study(db, owner):
    from studies.services import reviews_import, reviews_parse, study_create

    study = study_create(owner=owner, slug="si2024", title="si2024", baseline_condition="Human")
    parsed = reviews_parse(
        study=study,
        fmt="si2024",
        reviews=SI_REVIEWS.read_bytes(),
        reviews_name=SI_REVIEWS.name,
        titles=SI_TITLES.read_bytes(),
        titles_name=SI_TITLES.name,
    )
    reviews_import(study=study, parsed=parsed, kind="si2024", actor=owner)
    return study
