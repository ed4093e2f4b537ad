from __future__ import annotations

import json
from typing import Any

from django import forms

from .protocol import jsonsafe


class ReviewImportForm(forms.Form):
    format = forms.ChoiceField(
        choices=[
            ("si2024", "Si et al. 2024 release (JSON of columns)"),
            ("generic", "Generic CSV / JSON / JSONL"),
        ]
    )
    reviews = forms.FileField(help_text="The reviews file.")
    titles = forms.FileField(required=False, help_text="si2024 only: the id → title CSV.")
    mapping = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='Generic only: JSON object FIELD → COLUMN, e.g. {"idea_id": "paper", "novelty": "nov"}.',
    )
    human_conditions = forms.CharField(
        required=False, help_text="Generic only: comma-separated condition keys of kind human."
    )

    def clean_mapping(self) -> dict[str, str]:
        raw = self.cleaned_data.get("mapping") or ""
        if not raw.strip():
            return {}
        try:
            value: Any = jsonsafe.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg}") from exc
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise forms.ValidationError("expected a JSON object of strings")
        return {str(k): v for k, v in value.items()}

    def clean_human_conditions(self) -> list[str]:
        raw = self.cleaned_data.get("human_conditions") or ""
        return [c.strip() for c in raw.split(",") if c.strip()]


class ReviewDecisionForm(forms.Form):
    decision = forms.ChoiceField(
        choices=[("accepted", "Accept (pay)"), ("rejected", "Reject (do not pay)")],
        widget=forms.RadioSelect,
    )
    reason = forms.CharField(required=False, max_length=2000, label="Reason (needed to reject)")


class PaymentSeedForm(forms.Form):
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=2**32 - 1,
        label="Tie-break seed",
        help_text="Ideas with equal mean scores are ordered at random from this seed.",
    )
