"""Forms for creating a study, its settings page and its team page. They validate
(ranges, choices, the lock table's refusals are the service's); the services in
`studies.services.study` save."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from .models import PlatformLink, Study, StudyMember
from .protocol.forms import FormDefinition, FormFileError, builtin_form_names
from .reviewer_forms import review_form_resolve
from .services.study import (
    REVIEWER_VISIBLE,
    SLUG_NAME_MAX,
    SetupError,
    conditions_parse,
    conditions_text,
    topics_parse,
    topics_text,
)

CONDITIONS_HELP = (
    "Comma-separated keys, e.g. Human, AI, AI_Rerank. Keys starting with “Human” are human "
    "ideas, the others AI; write KEY:human or KEY:ai to say so explicitly."
)
TOPICS_HELP = "One topic per line (or comma-separated on one line)."


def _mark_reviewer_visible(form: forms.BaseForm) -> None:
    """Say, under each field reviewers read, where they read it (after any lock reason)."""
    for name, where in REVIEWER_VISIBLE.items():
        field = form.fields.get(name)
        if field is None:
            continue
        note = (
            f"Reviewers see this on {where}: do not name the conditions or where the ideas "
            "come from."
        )
        field.help_text = f"{field.help_text} {note}".strip() if field.help_text else note


def _form_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in builtin_form_names() if "@" not in name]


def _resolve_form(name: str) -> FormDefinition:
    try:
        return review_form_resolve(name)
    except FormFileError as exc:
        raise forms.ValidationError("; ".join(exc.problems)) from None


class ConditionsField(forms.CharField):
    def clean(self, value: Any) -> list[tuple[str, str]]:
        text = super().clean(value)
        try:
            return conditions_parse(text or "")
        except SetupError as exc:
            raise forms.ValidationError(str(exc)) from None


class TopicsField(forms.CharField):
    widget = forms.Textarea(attrs={"rows": 4})

    def clean(self, value: Any) -> list[str]:
        text = super().clean(value)
        try:
            return topics_parse(text or "")
        except SetupError as exc:
            raise forms.ValidationError(str(exc)) from None


def _check_ranges(cleaned: dict[str, Any], form: forms.BaseForm) -> None:
    """min ≤ max for loads and reviews per idea, said on the field (the database checks
    the same rules, so nothing inconsistent is ever stored)."""
    for low, high, what in [
        ("min_load", "max_load", "reviewer load"),
        ("min_reviews_per_idea", "max_reviews_per_idea", "reviews per idea"),
    ]:
        lo, hi = cleaned.get(low), cleaned.get(high)
        if lo is not None and hi is not None and lo > hi:
            form.add_error(high, f"The largest {what} must be at least the smallest ({lo}).")
    for name in ("min_load", "min_reviews_per_idea", "invitation_days"):
        if cleaned.get(name) == 0:
            form.add_error(name, "This must be at least 1.")
    # A link's signature expires after the server's limit whatever the study says, so a
    # longer validity would promise reviewers a link that stops working early.
    days, most = cleaned.get("invitation_days"), settings.IDEAREVIEW_INVITATION_MAX_DAYS
    if days is not None and days > most:
        form.add_error(
            "invitation_days",
            f"Invitation links on this server stop working after {most} days "
            f"(IDEAREVIEW_INVITATION_MAX_DAYS); choose {most} or fewer.",
        )
    for name in ("payment_per_review", "payment_per_idea", "payment_bonus"):
        value = cleaned.get(name)
        if value is not None and value < 0:
            form.add_error(name, "A payment cannot be negative.")


def _check_baseline(cleaned: dict[str, Any], form: forms.BaseForm) -> None:
    keys = [k for k, _ in cleaned.get("conditions") or []]
    baseline = cleaned.get("baseline_condition")
    if baseline and keys and baseline not in keys:
        form.add_error(
            "baseline_condition", f"The baseline must be one of the conditions: {', '.join(keys)}."
        )


class StudyCreateForm(forms.Form):
    slug = forms.SlugField(
        label="Short name",
        max_length=SLUG_NAME_MAX,
        help_text="The start of the study's address, e.g. ideas-2025; a few random "
        "characters follow it, so that the address is the study's alone.",
    )
    title = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    review_form = forms.ChoiceField(
        label="Review form", help_text="A built-in form; it can be changed until reviews exist."
    )
    conditions = ConditionsField(initial="Human, AI", help_text=CONDITIONS_HELP)
    baseline_condition = forms.CharField(
        label="Baseline condition",
        max_length=64,
        initial="Human",
        required=False,
        help_text="The condition the others are compared with.",
    )
    topics = TopicsField(required=False, help_text=TOPICS_HELP)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = _form_choices()
        self.fields["review_form"].choices = choices  # type: ignore[attr-defined]
        self.fields["review_form"].initial = "si2024" if ("si2024", "si2024") in choices else None
        _mark_reviewer_visible(self)

    def clean_slug(self) -> str:
        # No check against other studies: the address gets random characters after the
        # name (study_slug_new), so whether anyone used the name is never said.
        return str(self.cleaned_data["slug"]).lower()

    def clean_review_form(self) -> FormDefinition:
        return _resolve_form(self.cleaned_data["review_form"])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        _check_baseline(cleaned, self)
        return cleaned


#: The settings that govern reviewing done here (recruiting, assigning, the reviewers'
#: form requirements, deadlines, payments): a study of imported reviews has none of it,
#: so its settings page leaves them out and keeps their stored values.
REVIEWING_FIELDS = (
    "min_load",
    "max_load",
    "min_reviews_per_idea",
    "max_reviews_per_idea",
    "topic_choice_use",
    "gold_per_reviewer",
    "screening_min_papers",
    "invitation_days",
    "invitation_bind_email",
    "reviews_due_at",
    "rationale_min_words",
    "payment_currency",
    "payment_per_review",
    "payment_per_idea",
    "payment_bonus",
    "payment_bonus_top_k",
)

SETTINGS_FIELDS = ["title", "description", "baseline_condition", *REVIEWING_FIELDS]


class StudySettingsForm(forms.ModelForm):
    """Every study parameter. Locked ones are shown disabled with their reason (a
    disabled field keeps its stored value whatever is posted). For a study of imported
    reviews (``imported``) the fields of `REVIEWING_FIELDS` are left out."""

    conditions = ConditionsField(help_text=CONDITIONS_HELP)
    topics = TopicsField(required=False, help_text=TOPICS_HELP)
    review_form = forms.ChoiceField(label="Review form")

    class Meta:
        model = Study
        fields = SETTINGS_FIELDS
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "reviews_due_at": forms.DateTimeInput(
                attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"
            ),
        }
        labels = {
            "min_load": "Smallest reviewer load",
            "max_load": "Largest reviewer load",
            "min_reviews_per_idea": "Fewest reviews per idea",
            "max_reviews_per_idea": "Most reviews per idea",
            "topic_choice_use": "Use of the reviewers' two topic choices",
            "gold_per_reviewer": "Gold items per reviewer",
            "screening_min_papers": "Screening: papers at major venues needed",
            "invitation_days": "Invitations valid for (days)",
            "invitation_bind_email": "Invitation links work only for the invited address",
            "reviews_due_at": "Reviews due (UTC)",
            "rationale_min_words": "Words each rationale needs",
            "payment_per_review": "Payment per accepted review",
            "payment_per_idea": "Fee per idea",
            "payment_bonus": "Bonus per top idea",
            "payment_bonus_top_k": "Top ideas that get the bonus (k)",
        }

    def __init__(
        self, *args: Any, locks: dict[str, str], imported: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if imported:
            for name in REVIEWING_FIELDS:
                del self.fields[name]
        study: Study = self.instance
        self.locks = locks
        current = f"{study.review_form.key}@{study.review_form.version}"
        choices = [(current, f"{study.review_form.title} (current: {current})")]
        choices += [(n, n) for n, _ in _form_choices() if n != study.review_form.key]
        self.fields["review_form"].choices = choices  # type: ignore[attr-defined]
        self.fields["review_form"].initial = current
        self.fields["baseline_condition"].help_text = "One of the conditions."
        self.fields["conditions"].initial = conditions_text(study)
        self.fields["topics"].initial = topics_text(study)
        for name, reason in locks.items():
            if name in self.fields:
                self.fields[name].disabled = True
                self.fields[name].help_text = reason
        if not imported:
            _mark_reviewer_visible(self)

    GROUPS = [
        ("The study", ["title", "description"]),
        ("Conditions and topics", ["conditions", "baseline_condition", "topics"]),
        ("Review form", ["review_form", "rationale_min_words"]),
        (
            "Reviewers and assignment",
            [
                "screening_min_papers",
                "min_load",
                "max_load",
                "min_reviews_per_idea",
                "max_reviews_per_idea",
                "topic_choice_use",
                "gold_per_reviewer",
            ],
        ),
        ("Deadlines", ["invitation_days", "reviews_due_at"]),
        ("Invitations", ["invitation_bind_email"]),
        (
            "Payments",
            [
                "payment_currency",
                "payment_per_review",
                "payment_per_idea",
                "payment_bonus",
                "payment_bonus_top_k",
            ],
        ),
    ]

    def groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The fields in the sections the page shows, each field once."""
        groups = [
            (title, [self[name] for name in names if name in self.fields])
            for title, names in self.GROUPS
        ]
        return [(title, fields) for title, fields in groups if fields]

    def clean_review_form(self) -> FormDefinition | None:
        name = self.cleaned_data["review_form"]
        study: Study = self.instance
        if name == f"{study.review_form.key}@{study.review_form.version}":
            return None
        return _resolve_form(name)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        _check_ranges(cleaned, self)
        _check_baseline(cleaned, self)
        return cleaned


class MemberAddForm(forms.Form):
    identifier = forms.CharField(
        label="Username or email", max_length=254, help_text="A researcher's account."
    )
    role = forms.ChoiceField(choices=StudyMember.Role.choices, initial=StudyMember.Role.VIEWER)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=StudyMember.Role.choices)


class PlatformLinkForm(forms.ModelForm):
    """The arrival link for a participant platform (the participants page)."""

    completion_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        label="Completion URL",
        help_text="Prolific's is https://app.prolific.com/submissions/complete; write {code} "
        "where the code goes, or the code is added as the parameter below.",
    )

    class Meta:
        model = PlatformLink
        fields = [
            "enabled",
            "platform",
            "places",
            "abandon_minutes",
            "completion_url",
            "completion_code",
            "participant_param",
            "study_param",
            "session_param",
            "code_param",
            "platform_study_id",
        ]
        labels = {
            "enabled": "Take participants through this link",
            "platform": "Platform",
            "places": "Places",
            "abandon_minutes": "Release an idle place after (minutes)",
            "completion_url": "Completion URL",
            "completion_code": "Completion code",
            "participant_param": "URL parameter: participant id",
            "study_param": "URL parameter: study id",
            "session_param": "URL parameter: session id",
            "code_param": "Completion URL parameter for the code",
            "platform_study_id": "Platform study id (arrivals with another are refused)",
        }
        help_texts = {
            "completion_url": "Prolific's is https://app.prolific.com/submissions/complete; "
            "write {code} where the code goes, or the code is added as the parameter below.",
            "participant_param": "Prolific: PROLIFIC_PID. Another platform: the name it uses.",
            "study_param": "Prolific: STUDY_ID (blank: none).",
            "session_param": "Prolific: SESSION_ID (blank: none; a returning participant "
            "then resumes only in the browser they started in).",
        }

    def clean(self) -> dict[str, Any]:
        from .protocol.arrivals import ID_PATTERN, PARAM_PATTERN

        data = super().clean() or {}
        for name in ("participant_param", "study_param", "session_param", "code_param"):
            value = (data.get(name) or "").strip()
            data[name] = value
            if value and not PARAM_PATTERN.match(value):
                self.add_error(name, "Use letters, digits and - _ . only (at most 64).")
        if not data.get("participant_param"):
            self.add_error("participant_param", "The participant id's parameter is required.")
        study_id = (data.get("platform_study_id") or "").strip()
        data["platform_study_id"] = study_id
        if study_id and not ID_PATTERN.match(study_id):
            self.add_error("platform_study_id", "Not an id: letters, digits and - _ . : @ only.")
        return data
