"""PII detectors on their corpus, stable per-member tokens, and resolution from the
member's own memory only."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance.keys import multifernet
from governance.models import VaultSecret
from governance.pii import (
    PII_KINDS,
    TOKEN_RE,
    detokenise,
    find_pii,
    mask_pii,
    token_for,
    token_map,
    tokenise,
)
from governance.vault import (
    PII_KEY_PURPOSE,
    member_pii_key,
    pii_detokenise_for_member,
    pii_tokenise_for_member,
    rotate_all,
)

CORPUS = Path(__file__).parent / "corpus"
KEY_A = b"a" * 32
KEY_B = b"b" * 32


def _lines(name: str) -> list[str]:
    text = (CORPUS / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _positives(name: str) -> list[tuple[str, str, int, int]]:
    out = []
    for line in _lines(name):
        kind, marked = line.split("\t", 1)
        before, rest = marked.split("«", 1)
        value, after = rest.split("»", 1)
        out.append((kind, before + value + after, len(before), len(before) + len(value)))
    return out


POSITIVES = _positives("pii_positive.txt")
NEGATIVES = _lines("pii_negative.txt")


def test_the_corpus_is_large_enough_and_covers_every_detector() -> None:
    assert len(POSITIVES) >= 30
    assert len(NEGATIVES) >= 30
    assert {kind for kind, *_ in POSITIVES} == PII_KINDS


@pytest.mark.parametrize(
    ("kind", "text", "start", "end"),
    POSITIVES,
    ids=[f"{p[0]}-{i}" for i, p in enumerate(POSITIVES)],
)
def test_every_identifier_in_the_corpus_is_found_where_it_is(
    kind: str, text: str, start: int, end: int
) -> None:
    findings = find_pii(text)

    assert any(f.kind == kind and (f.start, f.end) == (start, end) for f in findings), findings
    tokenised = tokenise(text, KEY_A)
    assert text[start:end] not in tokenised
    assert token_for(kind, text[start:end], KEY_A) in tokenised
    assert tokenise(tokenised, KEY_A) == tokenised
    assert text[start:end] not in mask_pii(text)


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_in_the_corpus_passes_untouched(text: str) -> None:
    assert find_pii(text) == []
    assert tokenise(text, KEY_A) == text


def test_a_token_names_its_kind_and_a_keyed_digest() -> None:
    token = token_for("email", "ada@example.org", KEY_A)
    assert re.fullmatch(r"⟦pii:email:[0-9a-f]{12}⟧", token)
    assert TOKEN_RE.fullmatch(token)


def test_tokens_are_stable_per_member_and_value_and_differ_across_members() -> None:
    text = "mail ada@example.org or call +44 20 7946 0958"
    assert tokenise(text, KEY_A) == tokenise(text, KEY_A)
    assert tokenise(text, KEY_A) != tokenise(text, KEY_B)
    # Two spellings of one identifier share a token.
    assert token_for("email", "ADA@Example.org", KEY_A) == token_for(
        "email", "ada@example.org", KEY_A
    )
    assert token_for("phone", "+44 20 7946 0958", KEY_A) == token_for(
        "phone", "+44-20-7946-0958", KEY_A
    )


def test_an_empty_key_is_refused() -> None:
    with pytest.raises(ValueError):
        tokenise("ada@example.org", b"")


def test_detokenise_resolves_only_what_the_mapping_knows() -> None:
    own_memory = ["Ada's mail is ada@example.org", "office +44 20 7946 0958"]
    outbound = tokenise("write to ada@example.org and grace@example.org", KEY_A)
    mapping = token_map(own_memory, KEY_A)

    resolved = detokenise(outbound, mapping)

    assert "ada@example.org" in resolved
    assert "grace@example.org" not in resolved  # not in the member's memory
    assert token_for("email", "grace@example.org", KEY_A) in resolved
    # Another member's key resolves nothing.
    assert detokenise(outbound, token_map(own_memory, KEY_B)) == outbound


def test_ids_handles_and_markers_are_never_taken_for_identifiers() -> None:
    text = (
        "row 123e4567-e89b-12d3-a456-426614174000 vault://5f2a9c1e-0123-4567-8901-123456789012 "
        "[redacted:password] [pii:phone] ⟦pii:phone:012345678901⟧"
    )
    assert find_pii(text) == []


_pieces = st.sampled_from(
    ["ada@example.org", "+44 20 7946 0958", " ", "\n", "SW1A 1AA", "12", "-", ".", "x", "⟦", "⟧"]
)


@given(st.lists(st.one_of(_pieces, st.text(max_size=6)), max_size=20).map("".join))
def test_tokenising_is_idempotent_and_findings_never_overlap(text: str) -> None:
    once = tokenise(text, KEY_A)
    assert tokenise(once, KEY_A) == once
    for first, second in itertools.pairwise(find_pii(text)):
        assert first.end <= second.start


# -- the member's key in the vault ---------------------------------------------------------


def test_the_pii_key_is_created_once_in_the_vault_encrypted(member, tenant) -> None:
    first = member_pii_key(tenant=tenant, owner=member)
    again = member_pii_key(tenant=tenant, owner=member)

    assert first == again
    assert len(first) == 32
    row = VaultSecret.objects.get(tenant=tenant, owner=member, purpose=PII_KEY_PURPOSE)
    assert multifernet().decrypt(row.ciphertext.encode())  # stored encrypted
    assert row.ciphertext.encode() != first


def test_member_tokens_are_stable_and_differ_across_members(member, other_member, tenant) -> None:
    text = "Grace's number is +44 20 7946 0958"
    mine = pii_tokenise_for_member(text, tenant=tenant, owner=member)

    assert mine == pii_tokenise_for_member(text, tenant=tenant, owner=member)
    assert mine != pii_tokenise_for_member(text, tenant=tenant, owner=other_member)
    assert "7946" not in mine


def test_text_without_identifiers_creates_no_key(member, tenant) -> None:
    assert pii_tokenise_for_member("tea, no sugar", tenant=tenant, owner=member) == (
        "tea, no sugar"
    )
    assert not VaultSecret.objects.filter(owner=member).exists()


def test_only_the_members_own_memory_resolves_their_tokens(member, other_member, tenant) -> None:
    memory = ["my email is ada@example.org"]
    outbound = pii_tokenise_for_member("reply to ada@example.org", tenant=tenant, owner=member)

    assert pii_detokenise_for_member(outbound, tenant=tenant, owner=member, own_texts=memory) == (
        "reply to ada@example.org"
    )
    # Another member's key cannot resolve them, even given the same text.
    assert (
        pii_detokenise_for_member(outbound, tenant=tenant, owner=other_member, own_texts=memory)
        == outbound
    )
    # Once the member's memory no longer holds the value, the token stays a token.
    assert (
        pii_detokenise_for_member(outbound, tenant=tenant, owner=member, own_texts=[]) == outbound
    )


def test_tokens_survive_master_key_rotation(member, tenant, settings) -> None:
    from cryptography.fernet import Fernet

    before = pii_tokenise_for_member("ada@example.org", tenant=tenant, owner=member)
    settings.IRIS_MASTER_KEY = f"{Fernet.generate_key().decode()},{settings.IRIS_MASTER_KEY}"
    rotate_all()
    settings.IRIS_MASTER_KEY = settings.IRIS_MASTER_KEY.split(",")[0]

    assert pii_tokenise_for_member("ada@example.org", tenant=tenant, owner=member) == before
