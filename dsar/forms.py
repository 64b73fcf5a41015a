"""The forms of the data-rights pages. They collect what a person typed and turn it into a
service call's arguments; the rules themselves (what a payload may carry, which move is
allowed) are the services', whose refusals come back onto the field they name."""

from __future__ import annotations

from typing import Any

from django import forms

from dsar import wording
from dsar.enums import DeleteMode, VerificationMethod
from dsar.payloads import DEFAULT_GRACE_MS, PASSPHRASE_MAX
from governance.errors import IrisError
from governance.page_forms import add_refusal

GRACE_DAYS = DEFAULT_GRACE_MS // (24 * 3600 * 1000)
REASON_MAX = 500

# The payload field (as the services name it) behind each form field.
EXPORT_FIELDS = {
    "includeConsents": "include_consents",
    "includeOptOuts": "include_opt_outs",
    "includeNotebooks": "include_notebooks",
    "includeSessionMemory": "include_session_memory",
    "includeSceneMemory": "include_scene_memory",
    "includePoseMemory": "include_pose_memory",
    "passphrase": "passphrase",
    "encrypted": "passphrase",
}
DELETE_FIELDS = {
    "mode": "mode",
    "scopes": "scopes",
    "categories": "categories",
    "purgeConsentLedger": "purge_consent_ledger",
    "retentionGraceMs": "mode",
}


def add_service_error(form: forms.Form, exc: IrisError, fields: dict[str, str]) -> None:
    """Put a service's refusal on the form field it names, in plain words."""
    name = (exc.field or "").removeprefix("payload.")
    add_refusal(form, name, fields, wording.plain_error(exc.rule, exc.detail))


class RequestForm(forms.Form):
    """A form that files a request: its cleaned data as the payload the services take."""

    def payload(self) -> dict[str, Any]:
        raise NotImplementedError


class ExportRequestForm(RequestForm):
    include_consents = forms.BooleanField(
        label="Your consent choices and their history", required=False, initial=True
    )
    include_opt_outs = forms.BooleanField(
        label="Features you switched off", required=False, initial=True
    )
    include_notebooks = forms.BooleanField(label="Your notebooks", required=False, initial=True)
    include_session_memory = forms.BooleanField(
        label="Memory from single conversations", required=False, initial=True
    )
    include_scene_memory = forms.BooleanField(label="Living Scenes", required=False)
    include_pose_memory = forms.BooleanField(
        label="Pose samples (as totals, never raw movement)", required=False
    )
    passphrase = forms.CharField(
        label="Passphrase (optional)",
        help_text="Give a passphrase of at least 12 characters and we lock the copy with it. "
        "Keep it safe: we cannot open the copy for you without it.",
        required=False,
        strip=False,
        max_length=PASSPHRASE_MAX,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
    passphrase_again = forms.CharField(
        label="Passphrase again",
        required=False,
        strip=False,
        max_length=PASSPHRASE_MAX,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("passphrase", "") != data.get("passphrase_again", ""):
            self.add_error("passphrase_again", "The two passphrases you typed are not the same.")
        return data

    def payload(self) -> dict[str, Any]:
        data = self.cleaned_data
        payload: dict[str, Any] = {
            name: data[field] for name, field in EXPORT_FIELDS.items() if name.startswith("incl")
        }
        if data["passphrase"]:
            payload.update(encrypted=True, passphrase=data["passphrase"])
        return payload


MODE_CHOICES = [
    (
        DeleteMode.SOFT.value,
        f"Delete, with {GRACE_DAYS} days to change your mind",
    ),
    (DeleteMode.HARD.value, "Delete for good, at once"),
]


TOPIC_CHOICES: list[tuple[str, str]] = sorted(
    wording.TOPIC_LABELS.items(), key=lambda pair: pair[1]
)


class DeleteRequestForm(RequestForm):
    mode = forms.ChoiceField(
        label="How to delete", choices=MODE_CHOICES, widget=forms.RadioSelect, initial="soft"
    )
    scopes = forms.MultipleChoiceField(
        label="Kinds of memory",
        choices=list(wording.MEMORY_KIND_LABELS.items()),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    categories = forms.MultipleChoiceField(
        label="Topics",
        choices=TOPIC_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    purge_consent_ledger = forms.BooleanField(
        label="Also erase my consent history for these topics",
        help_text="Each entry keeps only a fingerprint, so the history can still be checked.",
        required=False,
    )
    understood = forms.BooleanField(
        label="I understand that deleting for good cannot be undone", required=False
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("mode") == DeleteMode.HARD and not data.get("understood"):
            self.add_error(
                "understood", "Tick this box to delete for good, or choose to delete with time."
            )
        return data

    def payload(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "mode": data["mode"],
            "scopes": sorted(data["scopes"]),
            "categories": sorted(data["categories"]),
            "purgeConsentLedger": data["purge_consent_ledger"],
        }


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Your code",
        max_length=32,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "spellcheck": "false"}
        ),
    )


# ------------------------------------------------------------------- the legal queue

OPERATOR_METHOD_CHOICES = [
    (VerificationMethod.OPERATOR_SIGNOFF.value, "Sign off: we checked the member's identity"),
    (VerificationMethod.COURT_ORDER.value, "A court order"),
]


class OperatorVerifyForm(forms.Form):
    method = forms.ChoiceField(
        label="How the request was verified",
        choices=OPERATOR_METHOD_CHOICES,
        widget=forms.RadioSelect,
        initial=VerificationMethod.OPERATOR_SIGNOFF.value,
    )
    reference = forms.CharField(
        label="Reference",
        help_text="Required for a court order: its case or order number.",
        required=False,
        max_length=REASON_MAX,
    )


class ExtendForm(forms.Form):
    reason = forms.CharField(
        label="Reason for the extension",
        help_text="The member reads this reason in their email and on their page.",
        max_length=REASON_MAX,
        widget=forms.Textarea(attrs={"rows": 3}),
    )


class FailForm(forms.Form):
    reason = forms.ChoiceField(
        label="Why it failed",
        choices=[(code, text) for code, text in wording.FAIL_REASONS.items()],
    )


class HoldForm(forms.Form):
    reason = forms.CharField(
        label="Reason for the legal hold",
        help_text="Kept for the legal team. The member sees only that a hold applies.",
        max_length=REASON_MAX,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
