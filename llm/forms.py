"""The endpoint part of a judge config form, shared by the judging pages and idea
normalization: an administrator's provider and one of its models, or the researcher's own
endpoint with their own key (or none)."""

from __future__ import annotations

from typing import Any

from django import forms

from .endpoints import endpoint_problem, provider_choices_text, provider_named, providers
from .models import EndpointKey


class EndpointFields(forms.Form):
    provider = forms.ChoiceField(
        required=False,
        help_text="An administrator's endpoint; its key stays on the server and goes only to "
        "that endpoint.",
    )
    base_url = forms.CharField(
        max_length=500,
        required=False,
        label="Your own endpoint",
        help_text="Only without a provider: an OpenAI-compatible base URL, e.g. "
        "https://llm.example.org/v1.",
    )
    model = forms.CharField(max_length=200, required=False)
    endpoint_key = forms.ModelChoiceField(
        queryset=EndpointKey.objects.none(),
        required=False,
        label="Your key",
        empty_label="— no key —",
        help_text="Only with your own endpoint: one of your saved keys (never shown again).",
    )

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        field = self.fields["provider"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "— my own endpoint —")] + [(p.name, p.name) for p in providers()]
        field.help_text += " " + provider_choices_text()
        keys = self.fields["endpoint_key"]
        assert isinstance(keys, forms.ModelChoiceField)
        uid = getattr(user, "pk", None) or 0
        keys.queryset = EndpointKey.objects.filter(owner_id=uid)

    def clean_base_url(self) -> str:
        return str(self.cleaned_data.get("base_url") or "").strip()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name = data.get("provider") or ""
        url = data.get("base_url") or ""
        model = (data.get("model") or "").strip()
        data["model"] = model
        if name:
            provider = provider_named(name)
            if url:
                self.add_error(
                    "base_url", "Leave this empty with a provider: the provider's URL is used."
                )
            if data.get("endpoint_key"):
                self.add_error("endpoint_key", "A provider uses its own key; choose no key.")
            if provider is not None and provider.models and model not in provider.models:
                self.add_error(
                    "model", f"{name} allows these models: {', '.join(provider.models)}."
                )
            if provider is not None and not provider.models and not model:
                self.add_error("model", "Name the model.")
        elif url:
            problem = endpoint_problem(url)
            if problem:
                self.add_error("base_url", f"This endpoint cannot be used: {problem}.")
            if not model:
                self.add_error("model", "Name the model your endpoint serves.")
        else:
            self.add_error("provider", "Choose a provider, or give your own endpoint's URL.")
        return data


class EndpointKeyForm(forms.Form):
    label = forms.CharField(max_length=120, help_text="A name for you to recognise it by.")
    secret = forms.CharField(
        max_length=2000,
        label="Key",
        widget=forms.PasswordInput(render_value=False),
        help_text="Stored encrypted; never shown again. Used only by your own judges.",
    )

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_label(self) -> str:
        label = self.cleaned_data["label"].strip()
        if EndpointKey.objects.filter(owner_id=getattr(self.user, "pk", 0), label=label).exists():
            raise forms.ValidationError("You have a key with this name already.")
        return label

    def clean_secret(self) -> str:
        secret = self.cleaned_data["secret"].strip()
        if not secret or any(c.isspace() or ord(c) < 32 for c in secret):
            raise forms.ValidationError("A key is one line without spaces.")
        return secret
