"""Forms for the owner's judge pages. They validate; the services create (style 4)."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from llm.client import parameters_problem
from llm.forms import EndpointFields
from llm.models import JudgeConfig
from llm.services import judge_configs_of
from studies.protocol import jsonsafe

from .methods.registry import method_choices


def _json_object(text: str, what: str) -> dict[str, Any]:
    text = (text or "").strip()
    if not text:
        return {}
    try:
        value = jsonsafe.loads(text)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"{what} is not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f'{what} must be a JSON object, like {{"temperature": 0}}')
    return value


class JudgeConfigForm(EndpointFields):
    name = forms.CharField(max_length=120)
    parameters = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        initial='{"temperature": 0}',
        help_text="JSON object sent with every call (temperature, max_tokens, seed…).",
    )
    price_input_per_million = forms.DecimalField(
        min_value=0, max_digits=12, decimal_places=6, initial=0
    )
    price_output_per_million = forms.DecimalField(
        min_value=0, max_digits=12, decimal_places=6, initial=0
    )
    concurrency = forms.IntegerField(min_value=1, max_value=256, initial=4)
    timeout_seconds = forms.FloatField(min_value=1, max_value=3600, initial=120)
    max_attempts = forms.IntegerField(min_value=1, max_value=20, initial=5)
    backoff_seconds = forms.FloatField(min_value=0, max_value=600, initial=1.0)
    reasoning = forms.ChoiceField(
        choices=JudgeConfig.Reasoning.choices,
        initial=JudgeConfig.Reasoning.AUTO,
        required=False,
        label="Reasoning model",
        help_text="A reasoning model is sent max_completion_tokens instead of max_tokens and "
        "no temperature, top_p or penalties (which such models refuse).",
    )
    structured_outputs = forms.BooleanField(
        required=False,
        label="Structured outputs",
        help_text="Ask for each method's answer under a JSON schema (response_format); "
        "an endpoint that refuses it is asked without it.",
    )

    field_order = ["name", "provider", "model", "base_url", "endpoint_key", "parameters"]

    def __init__(self, *args: Any, study: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.study = study

    def clean_name(self) -> str:
        # Names are unique within the study (and against the administrator's judges it
        # lists): the answer speaks only of judges this page shows.
        name = self.cleaned_data["name"].strip()
        if judge_configs_of(self.study).filter(name=name).exists():
            raise forms.ValidationError("This study has a judge with this name already.")
        return name

    def clean_reasoning(self) -> str:
        return self.cleaned_data.get("reasoning") or JudgeConfig.Reasoning.AUTO

    def clean_parameters(self) -> dict[str, Any]:
        params = _json_object(self.cleaned_data.get("parameters", ""), "Parameters")
        secret = [k for k in params if "key" in k.lower() or k.lower() == "token"]
        if secret:
            raise forms.ValidationError(
                f"Parameters must not carry credentials ({', '.join(secret)})."
            )
        problem = parameters_problem(params)
        if problem:
            raise forms.ValidationError(f"Parameters: {problem}.")
        return params


class JudgeRunForm(forms.Form):
    # Read from the registry each time a form is made.
    method = forms.ChoiceField(choices=method_choices)
    config = forms.ModelChoiceField(
        queryset=JudgeConfig.objects.none(),
        required=False,
        label="Judge",
        empty_label="Choose a judge",
        help_text="Needed by every method except the baselines.",
    )
    panel = forms.ModelMultipleChoiceField(
        queryset=JudgeConfig.objects.none(),
        required=False,
        label="More panel members",
        widget=forms.CheckboxSelectMultiple,
        help_text="Direct, absolute and pairwise runs: these judges are asked every prompt "
        "too; the panel's score is its members' mean, its pairwise verdict their majority "
        "(a split is a tie). The budget below covers all of them.",
    )
    params = forms.CharField(
        required=False,
        label="Parameters",
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text='JSON object overriding the defaults below, e.g. {"rounds": 5}; '
        '{"repeat_share": 0.1} asks a tenth of the prompts again, for the reliability '
        "panel's repetition stability (direct, absolute and pairwise runs).",
    )
    budget_calls = forms.IntegerField(
        min_value=1, required=False, help_text="Stop cleanly after this many paid calls."
    )
    budget_cost = forms.DecimalField(
        min_value=0,
        max_digits=14,
        decimal_places=6,
        required=False,
        help_text="Stop cleanly before spending more than this (in the judge's price unit).",
    )

    def __init__(self, *args: Any, configs: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for name in ("config", "panel"):
            field = self.fields[name]
            assert isinstance(field, forms.ModelChoiceField)
            field.queryset = configs if configs is not None else JudgeConfig.objects.none()

    def clean_panel(self) -> list[JudgeConfig]:
        # In the order offered; the service refuses the run's own judge named again.
        return list(self.cleaned_data.get("panel") or [])

    def clean_params(self) -> dict[str, Any]:
        return _json_object(self.cleaned_data.get("params", ""), "Parameters")


class RunBudgetForm(forms.Form):
    """The limits a stopped run resumes under; empty means no limit."""

    budget_calls = forms.IntegerField(
        min_value=1,
        required=False,
        label="Paid calls, at most",
        help_text="Counted over the whole run, the calls made so far included. Empty: no limit.",
    )
    budget_cost = forms.DecimalField(
        min_value=0,
        max_digits=14,
        decimal_places=6,
        required=False,
        label="Cost, at most",
        help_text="In the judge's price unit, over the whole run. Empty: no limit.",
    )


class CorpusUploadForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    file = forms.FileField(help_text="PAIR-IQ-style JSON (a list of papers) or JSON Lines.")
