"""The administrator's pages read JSON through the depth-limited reader too: deep
nesting in any JSON field of any admin page is a form error, never a 500."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import JSONField
from django.test import Client, RequestFactory
from django.urls import reverse

from llm.models import JudgeConfig
from studies.admin import LimitedJSONFormField

pytestmark = pytest.mark.django_db

DEEP = "[" * 5000 + "]" * 5000


def test_every_admin_json_field_uses_the_depth_limited_reader():
    request = RequestFactory().get("/")
    checked = 0
    for model, model_admin in admin.site._registry.items():
        for field in model._meta.get_fields():
            if isinstance(field, JSONField) and field.editable:
                form_field = model_admin.formfield_for_dbfield(field, request=request)
                assert isinstance(form_field, LimitedJSONFormField), (model, field.name)
                checked += 1
    assert checked >= 10


def test_deep_json_in_the_judge_admin_is_a_form_error_and_nothing_is_saved():
    superuser = get_user_model().objects.create_superuser("root", password="root-pass-123")
    c = Client()
    c.force_login(superuser)
    response = c.post(
        reverse("admin:llm_judgeconfig_add"),
        {
            "name": "deep",
            "model": "m",
            "parameters": DEEP,
            "price_input_per_million": "0",
            "price_output_per_million": "0",
            "concurrency": "1",
            "timeout_seconds": "60",
            "max_attempts": "1",
            "backoff_seconds": "0",
        },
    )
    assert response.status_code == 200
    assert "nested deeper than" in response.content.decode()
    assert not JudgeConfig.objects.filter(name="deep").exists()
