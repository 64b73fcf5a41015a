"""`{% load vocabulary %}`: the member's words for a stored value, in templates.

`{{ entry.lifecycle|words:"lifecycle" }}` reads "Forgotten", never `tombstoned`;
`{{ entry.scope_kind|help:"scope" }}` the sentence that explains it. The tables are
`governance.vocabulary.TABLES`; an unknown table name is a template bug and raises.
"""

from __future__ import annotations

from django import template

from governance import vocabulary

register = template.Library()


@register.filter
def words(value: object, table: str) -> str:
    return vocabulary.label(table, value)


@register.filter(name="help")
def help_filter(value: object, table: str) -> str:
    return vocabulary.help_text(table, value)
