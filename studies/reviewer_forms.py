"""Forms for reviewers and for the owner's recruitment pages. They validate; services
save. Error messages name form fields only, never an idea.

`review_form_resolve` turns a built-in form name, a stored form's key or a form file
(docs/forms.md) into the definition a study is created with.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

from django import forms
from django.contrib.auth import password_validation

from .models import PairJudgment, PairTask, ReviewForm, Study
from .protocol.forms import (
    AttentionCheck,
    FormDefinition,
    FormFileError,
    Scale,
    builtin_form,
    builtin_form_names,
    form_parse_json,
)
from .protocol.textcheck import control_character_problem
from .services.reviews import words
from .uploads import KeptUploadForm

MAX_FORM_FILE_BYTES = 1_000_000
MAX_INVITATION_FILE_BYTES = 1_000_000


def no_control_characters(value: str) -> None:
    problem = control_character_problem(value)
    if problem:
        raise forms.ValidationError(f"This text {problem}.")


def review_form_resolve(name_or_path: str | Path) -> FormDefinition:
    """The review form named by `name_or_path`, or FormFileError saying why not.

    Tried in this order: a built-in name (`si2024`, `execution`, or `KEY@VERSION` for an
    older version), a form stored in the database by its key (newest version, or
    `KEY@VERSION`), then a path to a JSON form file, which is validated.
    """
    name = str(name_or_path).strip()
    if not name:
        raise FormFileError(["no form given; name a built-in form or a JSON form file"], "form")
    looks_like_path = isinstance(name_or_path, Path) or name.endswith(".json") or "/" in name
    if not looks_like_path:
        try:
            return builtin_form(name)
        except KeyError:
            pass
        stored = _stored_form(name)
        if stored is not None:
            return stored.as_definition()
    path = Path(name).expanduser()
    if not path.is_file():
        raise FormFileError(
            [
                f"no built-in or stored review form {name!r} and no such file; "
                f"built-ins: {', '.join(builtin_form_names())}"
            ],
            name,
        )
    if path.stat().st_size > MAX_FORM_FILE_BYTES:
        raise FormFileError([f"the file is larger than {MAX_FORM_FILE_BYTES} bytes"], name)
    return form_parse_json(path.read_bytes(), source=str(path))


def study_review_definition(study: Study) -> FormDefinition:
    """The study's form as its reviewers answer it: the study's rationale minimum, when
    set, replaces the form's own (a metric's own minimum still wins)."""
    definition = study.form_definition()
    return dataclasses.replace(definition, min_rationale_words=study.rationale_minimum())


def _stored_form(name: str) -> ReviewForm | None:
    key, _, version = name.partition("@")
    forms_ = ReviewForm.objects.filter(key=key)
    if version:
        if not version.isdigit():
            return None
        forms_ = forms_.filter(version=int(version))
    return forms_.order_by("-version").first()


class SignUpForm(forms.Form):
    email = forms.EmailField()
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput, strip=False)
    password2 = forms.CharField(label="Password again", widget=forms.PasswordInput, strip=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        p1, p2 = data.get("password1"), data.get("password2")
        if p1 and p2 and p1 != p2:
            self.add_error("password2", "The two passwords differ.")
        elif p1:
            try:
                password_validation.validate_password(p1)
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


class ConsentForm(forms.Form):
    consent = forms.BooleanField(
        label="I agree to take part and to the use of my anonymised reviews for research."
    )
    honor_code = forms.BooleanField()

    def __init__(self, *args: Any, honor_code: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["honor_code"].label = honor_code or "I will write my reviews myself."


class TopicsLoadForm(forms.Form):
    """The topics and load a reviewer chose: part of their profile, and what the study
    team may change for them once the profile is screened."""

    topic_first = forms.ChoiceField(label="First-choice topic")
    topic_second = forms.ChoiceField(label="Second-choice topic", required=False)
    preferred_load = forms.TypedChoiceField(coerce=int, label="How many ideas will you review?")

    def __init__(self, *args: Any, study: Study, **kwargs: Any):
        super().__init__(*args, **kwargs)
        topics = [(t.name, t.name) for t in study.topics.all()]
        cast(forms.ChoiceField, self.fields["topic_first"]).choices = [("", "—"), *topics]
        cast(forms.ChoiceField, self.fields["topic_second"]).choices = [("", "— (none)"), *topics]
        cast(forms.ChoiceField, self.fields["preferred_load"]).choices = [
            (n, str(n)) for n in study.load_choices()
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("topic_first") and data.get("topic_first") == data.get("topic_second"):
            self.add_error("topic_second", "Choose a different second topic, or none.")
        return data


class ProfileForm(TopicsLoadForm):
    field_order = [
        "institution",
        "position",
        "major_venue_papers",
        "scholar_url",
        "reviewing_experience",
        "topic_first",
        "topic_second",
        "preferred_load",
    ]

    institution = forms.CharField(max_length=300)
    position = forms.ChoiceField(
        choices=[
            ("", "—"),
            ("PhD student", "PhD student"),
            ("Master's student", "Master's student"),
            ("Postdoc", "Postdoc"),
            ("Research scientist", "Research scientist / engineer"),
            ("Professor", "Professor / faculty"),
            ("Other", "Other"),
        ]
    )
    major_venue_papers = forms.IntegerField(
        min_value=0,
        max_value=1000,
        label="Papers at major AI venues",
        help_text="For example ACL, EMNLP, NAACL, NeurIPS, ICLR, ICML, AAAI.",
    )
    scholar_url = forms.URLField(
        required=False, assume_scheme="https", label="Google Scholar (or similar) profile"
    )
    reviewing_experience = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Prior reviewing experience",
        help_text="Venues you have reviewed for, roughly how often.",
    )


class OwnerTopicsLoadForm(TopicsLoadForm):
    """The study team's change to a screened reviewer's topics and load."""

    note = forms.CharField(
        max_length=1000,
        required=False,
        label="Why (kept in the audit log)",
        help_text="For example what the reviewer wrote to you.",
        validators=[no_control_characters],
    )

    def __init__(self, *args: Any, study: Study, **kwargs: Any):
        super().__init__(*args, study=study, **kwargs)
        self.fields["preferred_load"].label = "Ideas to review (load)"


class PaymentHandleForm(forms.Form):
    payment_handle = forms.CharField(
        max_length=300,
        required=False,
        label="Payment details (optional)",
        help_text=(
            "How the study team can pay you for your accepted reviews: for example a "
            "PayPal address, or the name and account your bank transfer should go to. "
            "Only the study's owners see it, in their payment list; it is never shown to "
            "other reviewers or put in any published data."
        ),
    )


def scale_choices(scale: Scale) -> list[tuple[str, str]]:
    return [
        (str(v), f"{v} — {scale.anchor(v)}" if scale.anchor(v) else str(v)) for v in scale.levels
    ]


class ReviewAnswersForm(forms.Form):
    """The study's review form, built from its definition."""

    minutes = forms.FloatField(
        required=False,
        min_value=1,
        max_value=24 * 60,
        label="How many minutes did this review take you?",
    )

    def __init__(self, *args: Any, definition: FormDefinition, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.definition = definition
        # In page order: an attention check is asked like a metric, where the form puts it.
        for item in definition.items():
            if isinstance(item, AttentionCheck):
                self.fields[item.key] = forms.ChoiceField(
                    choices=scale_choices(item.scale),
                    label=item.scale.label,
                    widget=forms.RadioSelect,
                )
                continue
            m = item
            self.fields[m.key] = forms.ChoiceField(
                choices=scale_choices(m), label=m.label, widget=forms.RadioSelect
            )
            if m.rationale:
                self.fields[f"{m.key}_rationale"] = forms.CharField(
                    label=f"{m.label} rationale",
                    widget=forms.Textarea,
                    max_length=20_000,
                    required=m.rationale_required,
                    validators=[no_control_characters],
                )
        for s in definition.questions:
            self.fields[s.key] = forms.ChoiceField(
                choices=scale_choices(s), label=s.label, widget=forms.RadioSelect
            )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for m in self.definition.metrics:
            need = self.definition.rationale_words(m)
            key = f"{m.key}_rationale"
            text = data.get(key)
            if text and words(text) < need:
                self.add_error(
                    key,
                    f"{m.label} rationale has {words(text)} words; write at least {need}.",
                )
        return data

    def missing(self) -> list[str]:
        """One line per problem, in the order the fields appear on the page."""
        lines = []
        for name, field in self.fields.items():
            for error in map(str, self.errors.get(name, [])):
                if error == field.error_messages.get("required"):
                    what = "a score" if not name.endswith("_rationale") else "a rationale"
                    if name == "minutes":
                        what = "a number"
                    lines.append(f"{field.label}: {what} is missing.")
                elif str(field.label) in error:
                    lines.append(error)
                else:
                    lines.append(f"{field.label}: {error}")
        return lines

    def draft_keys(self) -> list[str]:
        return list(self.fields)


def draft_from_post(definition: FormDefinition, post: Any) -> dict[str, str]:
    keys = ["minutes", "familiarity", "confidence"]
    for m in definition.metrics:
        keys += [m.key, f"{m.key}_rationale"]
    keys += [c.key for c in definition.attention_checks]
    return {k: post.get(k, "") for k in keys if post.get(k, "") != ""}


class PairForm(forms.Form):
    rationale = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Why? (optional)",
        max_length=20_000,
        validators=[no_control_characters],
    )

    def __init__(self, *args: Any, task: PairTask, labels: dict[str, str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.dimension_keys = list(task.dimensions)
        for d in self.dimension_keys:
            self.fields[d] = forms.ChoiceField(
                choices=PairJudgment.Choice.choices,
                label=labels.get(d, d.title()),
                widget=forms.RadioSelect,
            )
        self.order_fields([*self.dimension_keys, "rationale"])

    def missing(self) -> list[str]:
        return [
            f"{self.fields[d].label}: choose one." for d in self.dimension_keys if d in self.errors
        ]


# --------------------------------------------------------------------------- owner forms


class InvitationForm(forms.Form):
    name = forms.CharField(max_length=200, required=False)
    email = forms.EmailField()


class InvitationUploadForm(KeptUploadForm):
    """An invitation file, or the one read before (kept) to invite its valid rows."""

    max_bytes = MAX_INVITATION_FILE_BYTES

    file = forms.FileField(
        required=False,
        help_text="CSV with columns name,email (a header row is optional), or JSONL with "
        "one object per line holding name and email.",
    )
    valid_only = forms.BooleanField(
        required=False, label="Invite the valid rows and skip the ones with problems"
    )


class ScreeningForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(max_length=1000, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("decision") == "reject" and not (data.get("reason") or "").strip():
            self.add_error("reason", "Give a reason for the rejection.")
        return data


class AssignmentPreviewForm(forms.Form):
    mode = forms.ChoiceField(
        choices=[
            ("keep", "Keep every current assignment; fill the gaps (new or dropped reviewers)"),
            ("resolve", "Keep only submitted reviews; re-draw all open work"),
        ],
        initial="keep",
        widget=forms.RadioSelect,
    )
    extra_load = forms.BooleanField(
        required=False,
        label="Allow current reviewers more ideas than they asked for (up to the study's maximum)",
    )
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**32 - 1)


class PairTaskCreateForm(forms.Form):
    per_reviewer = forms.IntegerField(min_value=1, max_value=20, initial=2)
    condition_a = forms.ChoiceField(required=False, label="First condition (optional)")
    condition_b = forms.ChoiceField(required=False, label="Second condition (optional)")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**32 - 1)

    def __init__(self, *args: Any, study: Study, **kwargs: Any):
        super().__init__(*args, **kwargs)
        choices = [("", "any (random same-topic pairs)")] + [
            (c.key, c.key) for c in study.conditions.all()
        ]
        cast(forms.ChoiceField, self.fields["condition_a"]).choices = choices
        cast(forms.ChoiceField, self.fields["condition_b"]).choices = choices

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        a, b = data.get("condition_a"), data.get("condition_b")
        if bool(a) != bool(b):
            raise forms.ValidationError("Choose both conditions of the pair, or neither.")
        if a and a == b:
            raise forms.ValidationError("Choose two different conditions.")
        return data


class PairTaskUploadForm(forms.Form):
    file = forms.FileField(help_text="CSV rows reviewer,idea_a,idea_b (pseudonym, external ids).")


class DueDateForm(forms.Form):
    reviews_due_at = forms.DateTimeField(
        required=False,
        label="Reviews due (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
    )
