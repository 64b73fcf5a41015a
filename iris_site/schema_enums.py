"""Choice sets that share a field name across API components, named once for the schema
(drf-spectacular's ENUM_NAME_OVERRIDES matches a field by its values and labels, which
are the values themselves in Iris's serializers)."""

from __future__ import annotations

from consent.enums import SURFACES
from dsar.enums import RequestKind
from memory.enums import ProvenanceKind


def provenance_kinds() -> list[str]:
    return [k.value for k in ProvenanceKind]


def data_rights_kinds() -> list[str]:
    return [k.value for k in RequestKind]


def product_surfaces() -> list[str]:
    return list(SURFACES)


def consent_record_types() -> list[str]:
    from consent.api import RECORDABLE_TYPES

    return list(RECORDABLE_TYPES)


def consent_record_statuses() -> list[str]:
    from consent.api import STATUSES

    return list(STATUSES)
