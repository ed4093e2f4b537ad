from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password


class InviteForm(forms.Form):
    email = forms.EmailField(label="Email address", max_length=254)


class PasswordPairForm(forms.Form):
    """A name and a password typed twice, checked by the password validators."""

    first_name = forms.CharField(label="First name", max_length=150)
    last_name = forms.CharField(label="Last name", max_length=150)
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput, strip=False)
    password2 = forms.CharField(label="Password again", widget=forms.PasswordInput, strip=False)

    def __init__(self, *args: Any, email: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.address = email

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        one, two = data.get("password1"), data.get("password2")
        if one and two and one != two:
            self.add_error("password2", "The two passwords differ.")
        elif one:
            user = get_user_model()(
                username=self.address or data.get("email", ""),
                email=self.address or data.get("email", ""),
                first_name=data.get("first_name", ""),
                last_name=data.get("last_name", ""),
            )
            try:
                validate_password(one, user)
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


class SignUpRequestForm(PasswordPairForm):
    email = forms.EmailField(label="Email address", max_length=254)
    note = forms.CharField(
        label="Who you are and what you will study (for the administrator)",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=2000,
        required=False,
    )

    field_order = ["email", "first_name", "last_name", "password1", "password2", "note"]


class DeactivateForm(forms.Form):
    successor = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        label="Hand their studies to",
        empty_label="(nobody: they own none)",
    )

    def __init__(self, *args: Any, candidates: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["successor"].queryset = candidates  # type: ignore[attr-defined]
