from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memory.enums import RecallSurface
from memory.rules.masking import (
    ACTOR_HANDLE_PATTERN,
    MultiActor,
    MultiActorRuleError,
    actor_handle,
    normalise_actor_name,
    redact_multi_actor,
    validate_relationship_note,
)

KEY = b"k" * 32
OTHER_KEY = b"o" * 32


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("Anna", "anna"),
        ("  ANNA   Schmidt ", "anna schmidt"),
        ("Dr. Anna-Maria O'Neil", "dr anna maria oneil"),
        ("ＡＮＮＡ", "anna"),  # full-width letters fold under NFKC
        ("Straße", "strasse"),
        ("anna\u200b", "anna"),  # zero-width space is invisible formatting
        ("Anna_Maria", "anna maria"),
    ],
)
def test_normalise_actor_name(name: str, normalised: str) -> None:
    assert normalise_actor_name(name) == normalised


def test_handle_has_prefix_and_32_hex_digits() -> None:
    handle = actor_handle(KEY, "Anna")
    assert ACTOR_HANDLE_PATTERN.fullmatch(handle)
    assert len(handle) == len("actor_") + 32


def test_handle_is_the_known_hmac_prefix() -> None:
    import hashlib
    import hmac

    expected = hmac.new(KEY, b"anna", hashlib.sha256).hexdigest()[:32]
    assert actor_handle(KEY, "Anna") == "actor_" + expected


@pytest.mark.parametrize("variant", ["anna", "ANNA", " Anna ", "Anna.", "ａｎｎａ"])
def test_handle_is_stable_across_name_variants(variant: str) -> None:
    assert actor_handle(KEY, variant) == actor_handle(KEY, "Anna")


def test_handles_differ_across_keys() -> None:
    assert actor_handle(KEY, "Anna") != actor_handle(OTHER_KEY, "Anna")


def test_different_people_get_different_handles() -> None:
    assert actor_handle(KEY, "Anna") != actor_handle(KEY, "Hanna")


@given(name=st.text(min_size=1).filter(lambda s: normalise_actor_name(s)))
def test_handle_depends_only_on_the_normalised_name(name: str) -> None:
    assert actor_handle(KEY, name) == actor_handle(KEY, normalise_actor_name(name))
    assert actor_handle(KEY, f"  {name.casefold()}. ") == actor_handle(KEY, name)


@given(st.text())
@example("C:\u0327")  # dropping ":" lets the cedilla compose with "c" on a second pass
def test_normalisation_is_idempotent(name: str) -> None:
    once = normalise_actor_name(name)
    assert normalise_actor_name(once) == once


def test_empty_key_or_name_is_refused() -> None:
    with pytest.raises(ValueError):
        actor_handle(b"", "Anna")
    with pytest.raises(MultiActorRuleError) as caught:
        actor_handle(KEY, " .. ")
    assert caught.value.field == "actorName"


def test_relationship_note_is_at_most_500_characters() -> None:
    assert validate_relationship_note("é" * 500) == "é" * 500
    with pytest.raises(MultiActorRuleError) as caught:
        validate_relationship_note("x" * 501)
    assert (caught.value.field, caught.value.rule) == ("relationshipNote", "too-long")


def test_multi_actor_validates_handle_and_note() -> None:
    handle = actor_handle(KEY, "Anna")
    assert MultiActor(handle, "my partner").sensitive_interaction is False
    with pytest.raises(MultiActorRuleError):
        MultiActor("Anna", "my partner")
    with pytest.raises(MultiActorRuleError):
        MultiActor(handle, "x" * 501)


REF = MultiActor(actor_handle(KEY, "Anna"), "my partner", sensitive_interaction=True)


@pytest.mark.parametrize(
    ("surface", "dsar", "visible"),
    [
        (RecallSurface.ADMIN, False, False),
        (RecallSurface.ADMIN, True, True),
        (RecallSurface.ASSISTANT, False, True),
        (RecallSurface.SHELL, False, True),
        (RecallSurface.NOTEBOOK, False, True),
        ("admin", False, False),
    ],
)
def test_redaction_rule(surface: RecallSurface | str, dsar: bool, visible: bool) -> None:
    expected = REF if visible else None
    assert redact_multi_actor(REF, surface=surface, dsar=dsar) == expected


def test_redacting_nothing_gives_nothing() -> None:
    assert redact_multi_actor(None, surface=RecallSurface.ASSISTANT, dsar=False) is None


def test_unknown_surface_is_an_error() -> None:
    with pytest.raises(ValueError):
        redact_multi_actor(REF, surface="billboard", dsar=False)
