"""What every app's pages do with a service's refusal: put it on the form field it names."""

from __future__ import annotations

from django import forms


def add_refusal(form: forms.Form, field: str, fields: dict[str, str], message: str) -> None:
    """Put `message` on the form field behind the service's `field` (through `fields`, the
    service's name → the form's), or on the form as a whole when the form has none."""
    target = fields.get(field, field)
    form.add_error(target if target in form.fields else None, message)
