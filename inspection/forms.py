"""The forms of the inspection pages. They collect what an operator typed and hand it to
`inspection.services`; the rules (who may grant, the gate, what a reference must be) are
the services', whose refusals come back onto the field they name."""

from __future__ import annotations

from django import forms

from governance.errors import IrisError
from governance.page_forms import add_refusal
from inspection import incidents, wording
from inspection.enums import PATHS, Sensitivity
from inspection.models import JUSTIFICATION_MAX

REFERENCE_MAX = 200

# The service's field name (wire spelling) behind each form field.
REQUEST_FIELDS = {
    "userId": "member",
    "member": "member",
    "path": "path",
    "sensitivity": "sensitivity",
    "justification": "justification",
    "incidentReference": "incident_reference",
    "consentSnapshotId": "consent_snapshot_id",
    "scope": "member",
}
GRANT_FIELDS = {
    "incidentReference": "incident_reference",
    "consentSnapshotId": "consent_snapshot_id",
}
DENY_FIELDS = {"reasonCode": "reason"}
CLOSE_FIELDS = {"carveOut": "carve_out"}
ISSUE_FIELDS = {"hours": "hours", "member": "member"}

PATH_ORDER = ("routine-review", "dsar-fulfillment", "incident-escalation")
assert set(PATH_ORDER) == {p.value for p in PATHS}


def add_service_error(form: forms.Form, exc: IrisError, fields: dict[str, str]) -> None:
    """Put a service's refusal on the form field it names, in plain words; a refusal that
    names no field of the form goes on the form as a whole."""
    name = (exc.field or "").split(".")[0]
    add_refusal(form, name, fields, wording.refusal(exc.code, exc.rule, exc.detail))


class RequestForm(forms.Form):
    member = forms.CharField(
        label="Member",
        help_text="Their username, or their member id.",
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    path = forms.ChoiceField(
        label="Why you need to look",
        choices=[(p, wording.PATH_LABELS[p]) for p in PATH_ORDER],
        widget=forms.RadioSelect,
    )
    sensitivity = forms.ChoiceField(
        label="What you need to see",
        choices=[(s.value, wording.SENSITIVITY_LABELS[s.value]) for s in Sensitivity],
        widget=forms.RadioSelect,
        initial=Sensitivity.STANDARD.value,
    )
    justification = forms.CharField(
        label="Justification",
        help_text="What you need to find out and why. The reviewer reads this; the member "
        "does not.",
        max_length=JUSTIFICATION_MAX,
        required=False,  # the service refuses an empty one, and that refusal is on record
        widget=forms.Textarea(attrs={"rows": 4}),
    )
    incident_reference = forms.CharField(
        label="Incident reference",
        help_text="For an incident escalation: the signed reference trust and safety issued.",
        max_length=REFERENCE_MAX,
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    consent_snapshot_id = forms.CharField(
        label="Consent snapshot",
        help_text="For sensitive memory: the id of the member's current consent to it.",
        max_length=64,
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class GrantForm(forms.Form):
    incident_reference = forms.CharField(
        label="Incident reference",
        help_text="Leave empty to use the one the request cited.",
        max_length=REFERENCE_MAX,
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    consent_snapshot_id = forms.CharField(
        label="Consent snapshot",
        help_text="Leave empty to use the one the request cited.",
        max_length=64,
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class DenyForm(forms.Form):
    reason = forms.ChoiceField(
        label="Why you deny it",
        choices=[(k, v) for k, v in wording.DENY_REASONS.items() if k != "withdrawn"],
    )


class CloseForm(forms.Form):
    carve_out = forms.BooleanField(
        label="Do not tell the member: an investigation is active",
        help_text="Trust and safety only, for an incident escalation. Recorded in the audit chain.",
        required=False,
    )


class IssueReferenceForm(forms.Form):
    member = forms.CharField(
        label="Member",
        help_text="Their username, or their member id.",
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    hours = forms.IntegerField(
        label="Valid for (hours)",
        help_text=f"At most {incidents.MAX_TTL_HOURS}. The reference is good for one grant.",
        min_value=1,
        max_value=incidents.MAX_TTL_HOURS,
        initial=incidents.DEFAULT_TTL_HOURS,
    )
