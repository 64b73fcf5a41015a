"""Data classification: the spec's table, as data (spec 003, "Data classification and the
egress gate").

Pure rules: no Django. Everything that moves is one of four classes, and the class decides
which model tier may see it. Memory bodies are `personal`; text that holds a credential is
`secret` and never goes into a prompt at all. The egress gate imports `may_egress`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from governance.secrets_screen import contains_secret


class Classification(StrEnum):
    PUBLIC = "public"  # freely shareable
    INTERNAL = "internal"  # not personal, not for publishing
    PERSONAL = "personal"  # the member's data: profile, mail, notes, every memory body
    SECRET = "secret"  # noqa: S105 - a class name: credentials, keys, vault values


class Tier(StrEnum):
    LOCAL = "local"
    CLOUD = "cloud"


# Where each class may go. `None` marks the one cell that depends on the tenant's opt-in.
EGRESS_TABLE: Mapping[Classification, Mapping[Tier, bool | None]] = {
    Classification.PUBLIC: {Tier.LOCAL: True, Tier.CLOUD: True},
    Classification.INTERNAL: {Tier.LOCAL: True, Tier.CLOUD: None},
    Classification.PERSONAL: {Tier.LOCAL: True, Tier.CLOUD: False},
    Classification.SECRET: {Tier.LOCAL: False, Tier.CLOUD: False},
}

# A memory body is the member's own data, whatever its category or scope.
MEMORY_BODY = Classification.PERSONAL


def may_egress(
    classification: Classification | str,
    tier: Tier | str,
    *,
    tenant_opted_in_internal_cloud: bool,
) -> bool:
    """May text of this class reach a model on this tier?

    public: any tier. internal: local, and cloud only when the tenant opted in for that kind
    of work. personal: local only. secret: never, not even locally (it never enters a
    prompt). An unknown class or tier raises ValueError: the caller has a bug or bad input,
    and guessing would be a silent policy.
    """
    rule = EGRESS_TABLE[Classification(classification)][Tier(tier)]
    if rule is None:
        return tenant_opted_in_internal_cloud
    return rule


def classify_text(
    text: str, *, default: Classification | str = Classification.PERSONAL
) -> Classification:
    """`secret` when the text holds what looks like a credential, otherwise `default`.

    A text is never classified lower than its source: this only ever raises the class.
    """
    if text and contains_secret(text):
        return Classification.SECRET
    return Classification(default)


_RANK = {
    Classification.PUBLIC: 0,
    Classification.INTERNAL: 1,
    Classification.PERSONAL: 2,
    Classification.SECRET: 3,
}


def strictest(*classes: Classification | str) -> Classification:
    """The class of a bundle made of parts: its most restricted part (public if empty)."""
    if not classes:
        return Classification.PUBLIC
    return max((Classification(c) for c in classes), key=_RANK.__getitem__)
