"""The secret screen and the classification table: the credential corpus, the pipeline
check at PRE_WRITE, and the scrub on what leaves Iris."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance.audit import Actor
from governance.classify import (
    MEMORY_BODY,
    Classification,
    Tier,
    classify_text,
    may_egress,
    strictest,
)
from governance.errors import ValidationFailed
from governance.models import AuditEvent
from governance.pipeline import Denied, Effect, Hook, Operation, govern
from governance.principal import Principal
from governance.secrets_screen import (
    _DETECTORS,
    SECRET_KINDS,
    _find,
    contains_secret,
    find_secrets,
    luhn_valid,
    redact_secrets,
    scrub_outbound,
    scrub_outbound_data,
    secret_kinds,
)
from governance.vault import is_handle, store_declared_secrets, vault_get

CORPUS = Path(__file__).parent / "corpus"


def _lines(name: str) -> list[str]:
    text = (CORPUS / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _positives(name: str) -> list[tuple[str, str, int, int]]:
    """(kind, text, start, end) from `kind<TAB>text with «value»` lines."""
    out = []
    for line in _lines(name):
        kind, marked = line.split("\t", 1)
        marked = marked.replace("\\n", "\n")
        before, rest = marked.split("«", 1)
        value, after = rest.split("»", 1)
        out.append((kind, before + value + after, len(before), len(before) + len(value)))
    return out


POSITIVES = _positives("secrets_positive.txt")
NEGATIVES = _lines("secrets_negative.txt")


def test_the_corpus_is_large_enough_and_covers_every_detector() -> None:
    assert len(POSITIVES) >= 30
    assert len(NEGATIVES) >= 30
    assert {kind for kind, *_ in POSITIVES} == SECRET_KINDS


@pytest.mark.parametrize(
    ("kind", "text", "start", "end"),
    POSITIVES,
    ids=[f"{p[0]}-{i}" for i, p in enumerate(POSITIVES)],
)
def test_every_credential_in_the_corpus_is_found_where_it_is(
    kind: str, text: str, start: int, end: int
) -> None:
    findings = find_secrets(text)

    assert any(f.kind == kind and (f.start, f.end) == (start, end) for f in findings), findings
    redacted = redact_secrets(text)
    assert text[start:end] not in redacted
    assert f"[redacted:{kind}]" in redacted
    assert redact_secrets(redacted) == redacted


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_in_the_corpus_passes_untouched(text: str) -> None:
    assert find_secrets(text) == []
    assert redact_secrets(text) == text


def test_redaction_keeps_the_words_around_the_value() -> None:
    assert redact_secrets("my password is hunter22, don't tell") == (
        "my password is [redacted:password], don't tell"
    )


def test_kinds_are_named_in_text_order_once_each() -> None:
    text = "pwd=abc123x and password: hunter2 then AKIAZZ7Q2M4X9B3N5P1L"
    assert secret_kinds(text) == ["password", "aws-access-key"]


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid("378282246310005")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("41111111111a1111")


# Values with a vendor prefix are found wherever they sit in surrounding prose.
_PREFIXED = [
    (kind, text[start:end])
    for kind, text, start, end in POSITIVES
    if kind in {"aws-access-key", "github-token", "stripe-key", "google-api-key", "iris-token"}
]
_prose = st.text(alphabet=st.sampled_from(list("abc XYZ.,;:!?()\n\t")), max_size=40)


@given(before=_prose, after=_prose, pick=st.sampled_from(_PREFIXED))
def test_prefixed_keys_are_redacted_in_any_surrounding_prose(
    before: str, after: str, pick: tuple[str, str]
) -> None:
    kind, value = pick
    redacted = redact_secrets(f"{before} {value} {after}")
    assert value not in redacted
    assert f"[redacted:{kind}]" in redacted


@given(st.text(max_size=300))
def test_findings_are_in_bounds_ordered_and_never_overlap(text: str) -> None:
    findings = find_secrets(text)
    for finding in findings:
        assert 0 <= finding.start < finding.end <= len(text)
    for first, second in itertools.pairwise(findings):
        assert first.end <= second.start
    assert redact_secrets(redact_secrets(text)) == redact_secrets(text)


# -- the gates: a detector skips a text only when it could not have matched it ---------------

_CORPUS_TEXTS = [text for _, text, _, _ in POSITIVES] + NEGATIVES


@pytest.mark.parametrize("text", _CORPUS_TEXTS)
def test_every_detector_that_matches_a_corpus_text_passes_its_gate(text: str) -> None:
    for detector in _DETECTORS:
        if detector.pattern.search(text):
            hinted = detector.hint is None or detector.hint.search(text) is not None
            assert hinted, (detector.kind, text)
    assert find_secrets(text) == _find(text, gated=False)


# Pieces of every detector's matches, the case variants `re.IGNORECASE` folds together (the
# long s, the Kelvin sign, dotted and dotless i), and filler, so drawn texts reach the
# detectors' edges: a gate that wrongly skipped a detector would lose a finding here.
_PIECES = [
    *(value for _, text, start, end in POSITIVES for value in (text[start:end], text)),
    *"aAbBsSkKiI019 :=\"'@/.-_\n",
    "ſ", "\u212a", "\u0130", "\u0131", "PaSSword", "PIN", "Bearer ", "TOKEN=", "api_KEY: ",
    "-----BEGIN RSA PRIVATE KEY-----", "eyJ", "AKIA", "ghp_", "xoxb-", "sk-", "sk_live_", "://",
    "4111 1111 1111 1111", "iris_", "AIza", "my password is ", "pwd=", "Authorization: Basic ",
]  # fmt: skip


@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join))
def test_the_gated_screen_finds_what_every_detector_finds(text: str) -> None:
    assert find_secrets(text) == _find(text, gated=False)


@given(st.text(max_size=200))
def test_the_gated_screen_agrees_on_any_text(text: str) -> None:
    assert find_secrets(text) == _find(text, gated=False)


# -- classification --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("classification", "tier", "opted_in", "allowed"),
    [
        ("public", "local", False, True),
        ("public", "cloud", False, True),
        ("internal", "local", False, True),
        ("internal", "cloud", False, False),
        ("internal", "cloud", True, True),
        ("personal", "local", True, True),
        ("personal", "cloud", True, False),
        ("secret", "local", True, False),
        ("secret", "cloud", True, False),
    ],
)
def test_the_classification_table(
    classification: str, tier: str, opted_in: bool, allowed: bool
) -> None:
    assert may_egress(classification, tier, tenant_opted_in_internal_cloud=opted_in) is allowed


def test_every_class_and_tier_has_a_rule() -> None:
    for classification, tier in itertools.product(Classification, Tier):
        for opted_in in (False, True):
            may_egress(classification, tier, tenant_opted_in_internal_cloud=opted_in)


def test_unknown_classes_and_tiers_are_refused_not_guessed() -> None:
    with pytest.raises(ValueError):
        may_egress("confidential", "local", tenant_opted_in_internal_cloud=True)
    with pytest.raises(ValueError):
        may_egress("public", "edge", tenant_opted_in_internal_cloud=True)


def test_memory_bodies_are_personal_and_credentials_are_secret() -> None:
    assert MEMORY_BODY is Classification.PERSONAL
    assert classify_text("I like tea") is Classification.PERSONAL
    assert classify_text("release notes", default="public") is Classification.PUBLIC
    assert classify_text("password: hunter2", default="public") is Classification.SECRET
    assert strictest("public", "internal") is Classification.INTERNAL
    assert strictest() is Classification.PUBLIC


# -- what leaves Iris ------------------------------------------------------------------------


def test_outbound_text_and_structures_are_scrubbed_but_handles_pass() -> None:
    handle = "vault://5f2a9c1e-0b1d-4c1e-9f2a-5f2a9c1e0b1d"
    assert scrub_outbound(f"key {handle}") == f"key {handle}"
    bundle = {
        "entries": [{"body": "pwd=abc123x"}, {"body": "tea"}],
        "count": 2,
        "note": ("Bearer abcdef0123456789abcdef",),
    }
    assert scrub_outbound_data(bundle) == {
        "entries": [{"body": "pwd=[redacted:password]"}, {"body": "tea"}],
        "count": 2,
        "note": ["Bearer [redacted:bearer-token]"],
    }


# -- the pipeline check ----------------------------------------------------------------------

SECRET_BODY = "note to self: pwd=Xy7_q2Lm9 for the router"
SECRET_VALUE = "Xy7_q2Lm9"


def _write(member, tenant, text: str, **attributes) -> Operation:
    return Operation(
        name="memory_write",
        effect=Effect.WRITE,
        principal=Principal(kind="member", id=member.public_id, tenant_id=tenant.id),
        tenant_id=tenant.id,
        member_id=member.public_id,
        attributes=attributes,
        text=text,
    )


def _audit_dump() -> str:
    return json.dumps(
        list(AuditEvent.objects.values("action", "reason_code", "subject_ids", "payload")),
        default=str,
    )


def test_a_write_holding_a_credential_is_refused_naming_the_kind_not_the_value(
    member, tenant
) -> None:
    with pytest.raises(Denied) as refused:
        govern(Hook.PRE_WRITE, _write(member, tenant, SECRET_BODY))

    assert refused.value.code == "secret-in-memory"
    assert "password" in refused.value.detail
    assert SECRET_VALUE not in json.dumps(refused.value.problem())
    event = AuditEvent.objects.get(action="iris.governance.decision.deny")
    assert event.reason_code == "secret-in-memory"
    assert {"check": "secret-screen", "verdict": "deny", "reason": "secret-in-memory"} in (
        event.payload["decisions"]
    )
    assert SECRET_VALUE not in _audit_dump()


def test_a_write_without_a_credential_passes_the_screen(member, tenant) -> None:
    decisions = govern(Hook.PRE_WRITE, _write(member, tenant, "I like green tea"))
    assert any(d.check == "secret-screen" and d.verdict == "allow" for d in decisions)


def test_the_screen_runs_at_pre_write_only(member, tenant) -> None:
    op = _write(member, tenant, SECRET_BODY)
    decisions = govern(Hook.POST_OPERATION, op)
    assert all(d.check != "secret-screen" for d in decisions)


def test_a_declared_secret_field_is_vaulted_and_the_body_becomes_a_handle(member, tenant) -> None:
    decisions = govern(
        Hook.PRE_WRITE,
        _write(member, tenant, SECRET_BODY, declared_secret_fields=("body",)),
    )
    assert any(d.check == "secret-screen" and d.reason_code == "secret-declared" for d in decisions)

    vaulted = store_declared_secrets(
        tenant=tenant,
        owner=member,
        fields={"body": SECRET_BODY, "category": "preferences"},
        declared=["body"],
        actor=Actor("member", str(member.public_id)),
    )

    assert is_handle(vaulted.fields["body"])
    assert vaulted.fields["category"] == "preferences"
    assert vaulted.handles == {"body": vaulted.fields["body"]}
    assert vault_get(vaulted.fields["body"], tenant=tenant, owner=member) == SECRET_BODY
    # The handle itself passes the screen: the memory that holds it can be written.
    govern(Hook.PRE_WRITE, _write(member, tenant, vaulted.fields["body"]))
    assert SECRET_VALUE not in _audit_dump()


def test_a_declared_field_that_is_not_in_the_write_is_a_400(member, tenant) -> None:
    with pytest.raises(ValidationFailed) as bad:
        store_declared_secrets(
            tenant=tenant, owner=member, fields={"body": "x"}, declared=["password"]
        )
    assert bad.value.field == "secretFields"


def test_declaring_another_field_does_not_let_the_body_through(member, tenant) -> None:
    with pytest.raises(Denied):
        govern(
            Hook.PRE_WRITE,
            _write(member, tenant, SECRET_BODY, declared_secret_fields=("title",)),
        )


def test_a_declared_field_is_matched_by_name_not_by_substring(member, tenant) -> None:
    govern(Hook.PRE_WRITE, _write(member, tenant, SECRET_BODY, declared_secret_fields="body"))
    with pytest.raises(Denied):
        govern(
            Hook.PRE_WRITE, _write(member, tenant, SECRET_BODY, declared_secret_fields="bodyguard")
        )


def test_a_uuid_whose_middle_groups_read_as_a_card_is_not_a_secret() -> None:
    # These digits pass Luhn and a card network's prefix: a member id once refused.
    assert contains_secret("655-8861-4624-9600-6983")
    assert not contains_secret("session:cbb9a655-8861-4624-9600-6983a72e7595:s-1")
    assert contains_secret("session cbb9a655 and card 655-8861-4624-9600-6983")


@given(st.uuids())
def test_no_member_id_in_a_scope_key_is_taken_for_a_credential(member_id) -> None:
    assert not contains_secret(f"session:{member_id}:s-1")
    assert not contains_secret(str(member_id).upper())
