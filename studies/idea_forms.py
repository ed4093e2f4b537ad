"""Forms for the idea-preparation pages. They validate; `studies.services.ideas` saves."""

from __future__ import annotations

from typing import Any

from django import forms

from llm.forms import EndpointFields
from llm.models import JudgeConfig
from llm.services import judge_configs_of

from .models import Condition, Study
from .protocol.template import SECTIONS
from .uploads import KeptUploadForm


class IdeaUploadForm(KeptUploadForm):
    """An idea file, or the one read before (kept) to import its valid rows."""

    file = forms.FileField(
        required=False,
        help_text="CSV or JSONL with columns external_id, topic, condition and text (or one "
        "column per section), optionally title and institution; a zip of Markdown files "
        "with front matter (the file name is the id unless external_id is given); or one "
        "Markdown file.",
    )
    import_valid_rows = forms.BooleanField(
        required=False, label="Import the valid rows and skip the ones with problems"
    )


class IdeaPasteForm(forms.Form):
    external_id = forms.CharField(max_length=200, label="External id")
    title = forms.CharField(max_length=500, required=False)
    topic = forms.ChoiceField()
    conditions = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)
    institution = forms.CharField(max_length=300, required=False, label="Author institution")
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14}),
        help_text="The proposal, ideally under the seven section headings.",
    )

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        topic_field: Any = self.fields["topic"]
        topic_field.choices = [(t.name, t.name) for t in study.topics.all()]
        condition_field: Any = self.fields["conditions"]
        condition_field.choices = [(c.key, c.key) for c in study.conditions.all()]


class TopicForm(forms.Form):
    name = forms.CharField(max_length=120, label="New topic")

    def __init__(self, *args: Any, study: Study | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.study = study

    def clean_name(self) -> str:
        # Files name topics ignoring case, so "bias" beside "Bias" would be the same topic.
        name = str(self.cleaned_data["name"]).strip()
        if self.study is not None and self.study.topics.filter(name__iexact=name).exists():
            raise forms.ValidationError(f"The study already has the topic '{name}'.")
        return name


class ConditionForm(forms.Form):
    key = forms.CharField(max_length=64, label="New condition")
    kind = forms.ChoiceField(choices=Condition.Kind.choices)

    def __init__(self, *args: Any, study: Study | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.study = study

    def clean_key(self) -> str:
        key = str(self.cleaned_data["key"]).strip()
        if self.study is not None and self.study.conditions.filter(key__iexact=key).exists():
            raise forms.ValidationError(f"The study already has the condition '{key}'.")
        return key


class GeneratingModelForm(forms.Form):
    """Which model wrote a condition's ideas (blank clears it); seen by the team only."""

    condition = forms.ChoiceField(label="Condition")
    generating_model = forms.CharField(
        max_length=200, required=False, label="Generating model", strip=True
    )

    def __init__(self, *args: Any, study: Study | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        keys = list(study.conditions.values_list("key", flat=True)) if study else []
        self.fields["condition"].choices = [(k, k) for k in keys]  # type: ignore[attr-defined]

    def clean_generating_model(self) -> str:
        value = str(self.cleaned_data.get("generating_model") or "")
        if any(ch in value for ch in "\r\n\t"):
            raise forms.ValidationError("A model name is one line.")
        return value


class SectionsForm(forms.Form):
    """One text box per template section."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for section in SECTIONS:
            rows = 1 if section.key == "title" else 4
            self.fields[section.key] = forms.CharField(
                label=section.heading,
                required=False,
                widget=forms.Textarea(attrs={"rows": rows}),
                help_text=section.guidance,
            )


class TopicReasonForm(forms.Form):
    reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why the study may open with unequal counts (empty to withdraw it).",
    )


class TopicApplyForm(forms.Form):
    seed = forms.IntegerField()
    idea_ids = forms.CharField(widget=forms.HiddenInput)

    def clean_idea_ids(self) -> list[int]:
        raw = self.cleaned_data["idea_ids"]
        try:
            return [int(x) for x in raw.split(",") if x.strip()]
        except ValueError as exc:
            raise forms.ValidationError("not a list of idea ids") from exc


class DuplicatesForm(forms.Form):
    threshold = forms.FloatField(min_value=0.01, max_value=0.99, initial=0.8)


class ConfigChoiceForm(forms.Form):
    config = forms.ModelChoiceField(
        queryset=JudgeConfig.objects.none(),
        required=False,
        empty_label="— none —",
        label="Judge config",
    )

    def __init__(self, *args: Any, study: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        field = self.fields["config"]
        assert isinstance(field, forms.ModelChoiceField)
        # The study's team's judges and the administrator's: never another team's, and an
        # id of one posted anyway is "not one of the choices", like an id that is free.
        field.queryset = judge_configs_of(study).filter(is_baseline=False)


class ConfigCreateForm(EndpointFields):
    name = forms.CharField(max_length=120)
    concurrency = forms.IntegerField(min_value=1, max_value=64, initial=4)
    timeout_seconds = forms.FloatField(min_value=1, initial=120)

    field_order = ["name", "provider", "model", "base_url", "endpoint_key"]

    def __init__(self, *args: Any, study: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.study = study

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if judge_configs_of(self.study).filter(name=name).exists():
            raise forms.ValidationError("this study has a judge with this name; choose it above")
        return name


class DecisionForm(forms.Form):
    action = forms.ChoiceField(
        choices=[
            ("approve", "Approve"),
            ("edit", "Save my edit and approve"),
            ("rerun", "Re-run"),
            ("reject", "Reject"),
        ]
    )
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 20}))
    reason = forms.CharField(required=False, max_length=2000)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "edit" and not (data.get("text") or "").strip():
            self.add_error("text", "Write the edited text to approve.")
        return data
