"""The stored consent ledger: append-only in the database, tamper-evident, derived by
latest-wins, erasable without breaking the chain, and announcing cascading revocations."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, IntegrityError, connection, models, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consent import ledger, selectors
from consent.enums import CaptureMethod, Category, ConsentType, LegalBasis, category_consent_type
from consent.models import BODY_TABLE, CHAIN_TABLE, ConsentEvent, ConsentEventBody
from consent.selectors import (
    active_consent_types,
    consent_entries,
    current_consent_event_id,
    member_ledger,
    opted_out_categories,
    scope_policies,
    verify_member_chain,
)
from consent.services import consent_purge_categories, consent_record, opt_out_record
from consent.signals import sensitive_consent_revoked
from governance import append_only
from governance.approvals import approval_decide
from governance.audit import Actor
from governance.errors import Conflict, ValidationFailed
from governance.kernel_models import Approval, SideEffect
from governance.models import AuditEvent, SurfaceClient, User
from governance.pipeline import Denied, HeldForApproval
from governance.principal import Principal
from governance.services import user_create
from tests.factories import as_member
from tests.helpers_db import find_in_database, run_together

pytestmark = pytest.mark.django_db

MEDICAL = category_consent_type(Category.MEDICAL)
FINANCIAL = category_consent_type(Category.FINANCIAL)


OPERATOR_ID = "op-1"


def as_operator(member: User) -> Principal:
    """A support operator: the witness of what it records (consent.capture)."""
    return Principal(
        kind="operator", id=OPERATOR_ID, tenant_id=member.tenant_id, roles=frozenset({"support"})
    )


def iris(member: User) -> Principal:
    """Iris itself, as the data-rights job that carries out an approved deletion."""
    return Principal.system("dsar", member.tenant_id)


def grant(member: User, consent_type: str, **extra):
    fields = {
        "principal": as_member(member),
        "member": member,
        "consent_type": consent_type,
        "status": "granted",
        "legal_basis": (
            LegalBasis.EXPLICIT_CONSENT
            if consent_type in ledger.SENSITIVE_CONSENT_TYPES
            else LegalBasis.CONSENT
        ),
        "capture_method": CaptureMethod.SETTINGS_TOGGLE,
    }
    if "occurred_at" in extra and "principal" not in extra:
        # Only an import may date an act in the past (consent.capture): these tests are
        # about the ledger's ordering, so Iris itself records them.
        fields.update(principal=iris(member), capture_method=CaptureMethod.DSAR_IMPORT)
    fields.update(extra)
    return consent_record(**fields)


def revoke(member: User, consent_type: str, **extra):
    return grant(member, consent_type, status="revoked", **extra)


def consent_audits() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action__startswith="iris.consent.").order_by("seq"))


def raw(sql: str, params=()) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def drop_triggers() -> None:
    # Inside the test's transaction: rolled back with it on both databases.
    for table in (CHAIN_TABLE, BODY_TABLE):
        append_only.uninstall(connection, table)


# ---------------------------------------------------------------- appending


def test_appends_form_one_chain_per_member_that_verifies(member, other_member) -> None:
    first = grant(member, ConsentType.DATA_PROCESSING)
    second = grant(member, ConsentType.DATA_STORAGE)
    grant(other_member, ConsentType.DATA_PROCESSING)

    assert (first.position, second.position) == (1, 2)
    assert first.prev_hash == ledger.GENESIS_HASH
    assert second.prev_hash == first.chain_hash
    assert second.chain_hash == ledger.chain_link(first.chain_hash, second.fingerprint)
    assert ConsentEvent.objects.get(member=other_member).position == 1
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) is None


def test_the_fingerprint_is_the_ledger_rule_over_the_stored_body(member) -> None:
    row = grant(member, ConsentType.DATA_PROCESSING)
    [event] = member_ledger(tenant_id=member.tenant_id, member=member)
    assert row.fingerprint == ledger.fingerprint(event, nonce=row.body.nonce)
    assert row.fingerprint != ledger.fingerprint(event)  # the nonce is hashed in
    assert event.member_id == str(member.public_id)
    assert len(row.body.nonce) == 32


def test_every_event_gets_its_own_nonce_so_identical_acts_hash_differently(member) -> None:
    when = timezone.now() - timedelta(days=1)
    a = grant(member, ConsentType.DATA_PROCESSING, occurred_at=when)
    b = grant(member, ConsentType.DATA_PROCESSING, occurred_at=when)
    assert a.body.nonce != b.body.nonce
    assert a.fingerprint != b.fingerprint


def test_append_writes_an_audit_event_without_content_in_the_same_transaction(member) -> None:
    row = grant(
        member,
        MEDICAL,
        principal=as_operator(member),
        capture_method=CaptureMethod.OPERATOR_RECORDED,
        witness=OPERATOR_ID,
    )
    [audit] = consent_audits()
    assert audit.action == "iris.consent.event.appended"
    assert audit.subject_ids == [str(member.public_id), str(row.id)]
    assert audit.payload["fingerprint"] == row.fingerprint
    assert audit.payload["status"] == "granted"
    # The category a member consents to is itself sensitive: it stays in the erasable ledger.
    assert audit.payload["consentType"] == "category:*"
    assert "medical" not in str(audit.payload) and "Witness" not in str(audit.payload)


def test_general_consent_types_are_named_in_the_audit(member) -> None:
    grant(member, ConsentType.DATA_STORAGE)
    assert consent_audits()[0].payload["consentType"] == "data_storage"


@pytest.mark.parametrize(
    ("overrides", "field", "allowed"),
    [
        ({"consent_type": "telepathy"}, "consent_type", "data_processing"),
        ({"status": "maybe"}, "status", "revoked"),
        ({"legal_basis": "vibes"}, "legal_basis", "legitimate_interests"),
        ({"legal_basis": "consent", "consent_type": MEDICAL}, "legal_basis", "explicit_consent"),
        ({"terms_version": "1999-01"}, "terms_version", "2025-09"),
    ],
)
def test_bad_input_names_the_field_and_the_allowed_values_and_writes_nothing(
    member, overrides, field, allowed
) -> None:
    before = AuditEvent.objects.count()
    consent_type = overrides.pop("consent_type", ConsentType.DATA_PROCESSING)
    with pytest.raises(ValidationFailed) as raised:
        grant(member, consent_type, **overrides)
    assert raised.value.field == field
    assert allowed in raised.value.allowed
    assert not ConsentEvent.objects.exists()
    assert AuditEvent.objects.count() == before  # refused before governance even ran


def test_revoking_what_was_never_granted_is_a_conflict_and_writes_nothing(member) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    revoke(member, ConsentType.DATA_PROCESSING)
    for consent_type in (MEDICAL, ConsentType.DATA_PROCESSING):
        with pytest.raises(Conflict) as raised:
            revoke(member, consent_type)
        assert raised.value.code == "consent-not-granted"
    assert ConsentEvent.objects.count() == 2
    assert len(consent_audits()) == 2


def test_opting_back_in_without_an_opt_out_is_a_conflict(member) -> None:
    with pytest.raises(Conflict):
        opt_out_record(
            principal=as_member(member),
            member=member,
            category="personalization",
            status="opted-in",
            legal_basis="consent",
            capture_method="settings-toggle",
        )
    assert not ConsentEvent.objects.exists()


def test_opt_outs_sit_in_the_same_chain_and_suppress_scopes(member) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    grant(member, ConsentType.DATA_STORAGE)
    opt_out_record(
        principal=as_member(member),
        member=member,
        category="long_term_memory",
        status="opted-out",
        legal_basis="consent",
        capture_method="settings-toggle",
    )
    tenant_id = member.tenant_id
    assert opted_out_categories(tenant_id=tenant_id, member=member) == {"long_term_memory"}
    policies = scope_policies(tenant_id=tenant_id, member=member)
    assert policies["notebook"].mode == "suppressed"
    assert policies["session"].mode == "durable"
    assert scope_policies(tenant_id=tenant_id, member=member, consumer="support")[
        "session"
    ].notes == ("Consumer support is not allowed to use this scope.",)
    assert verify_member_chain(tenant_id=tenant_id, member=member) is None


def test_another_tenants_principal_is_denied_and_the_denial_is_recorded(
    member, other_tenant
) -> None:
    intruder = Principal(kind="surface", id="s-1", tenant_id=other_tenant.id, surface="assistant")
    with pytest.raises(Denied):
        grant(member, ConsentType.DATA_PROCESSING, principal=intruder)
    assert not ConsentEvent.objects.exists()
    assert AuditEvent.objects.filter(action="iris.governance.decision.deny").exists()


def test_a_witness_that_looks_like_a_credential_is_refused_by_the_secret_screen(member) -> None:
    with pytest.raises(Denied) as raised:
        grant(
            member,
            ConsentType.DATA_PROCESSING,
            principal=as_operator(member),
            capture_method=CaptureMethod.OPERATOR_RECORDED,
            witness="Nurse AKIAIOSFODNN7EXAMPLE",
        )
    assert raised.value.code == "secret-in-memory"
    assert "witness" in raised.value.detail and "AKIA" not in raised.value.detail
    assert not ConsentEvent.objects.exists()


def test_selectors_are_scoped_to_the_tenant_first(member, other_tenant) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    assert member_ledger(tenant_id=other_tenant.id, member=member) == []
    assert active_consent_types(tenant_id=other_tenant.id, member=member) == frozenset()


def test_current_consent_event_id_names_the_deciding_grant(member) -> None:
    tenant_id = member.tenant_id
    assert (
        current_consent_event_id(tenant_id=tenant_id, member=member, consent_type=MEDICAL) is None
    )
    first = grant(member, MEDICAL)
    again = grant(member, MEDICAL)
    grant(member, FINANCIAL)
    assert current_consent_event_id(tenant_id=tenant_id, member=member, consent_type=MEDICAL) == (
        again.id
    )
    assert first.id != again.id
    revoke(member, MEDICAL)
    assert (
        current_consent_event_id(tenant_id=tenant_id, member=member, consent_type=MEDICAL) is None
    )


def test_selectors_read_the_chain_in_one_query(member, django_assert_num_queries) -> None:
    for consent_type in (ConsentType.DATA_PROCESSING, MEDICAL, FINANCIAL):
        grant(member, consent_type)
    revoke(member, FINANCIAL)
    tenant_id = member.tenant_id
    for read in (
        member_ledger,
        active_consent_types,
        opted_out_categories,
        consent_entries,
        scope_policies,
        verify_member_chain,
    ):
        with django_assert_num_queries(1):
            read(tenant_id=tenant_id, member=member)
    with django_assert_num_queries(1):
        current_consent_event_id(tenant_id=tenant_id, member=member, consent_type=MEDICAL)
    with django_assert_num_queries(1):
        selectors.consent_overview(tenant_id=tenant_id, member=member)


def test_consent_entries_come_from_the_stored_ledger(member) -> None:
    granted = grant(member, MEDICAL, capture_method=CaptureMethod.INLINE_PROMPT)
    revoked = revoke(member, MEDICAL)
    [entry] = consent_entries(tenant_id=member.tenant_id, member=member)
    assert entry.category == Category.MEDICAL
    assert entry.granted_at == granted.body.occurred_at
    assert entry.revoked_at == revoked.body.occurred_at
    assert entry.source == "inline-prompt"


# ---------------------------------------------------------------- the database refuses


@pytest.mark.parametrize(
    "sql",
    [
        f"UPDATE {CHAIN_TABLE} SET fingerprint = 'x'",
        f"DELETE FROM {CHAIN_TABLE}",
        f"UPDATE {BODY_TABLE} SET status = 'revoked'",
        f"UPDATE {BODY_TABLE} SET witness = 'someone else'",
    ],
)
def test_raw_update_and_delete_of_the_ledger_are_refused_by_the_database(member, sql) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw(sql)
    assert ConsentEventBody.objects.get().status == "granted"
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) is None


def test_truncating_the_chain_is_refused_on_postgres(member, require_postgres) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    raw("SET CONSTRAINTS ALL IMMEDIATE")  # run the deferred foreign-key checks first
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw(f"TRUNCATE {CHAIN_TABLE} CASCADE")
    assert ConsentEvent.objects.count() == 1


def test_the_model_layer_refuses_changes_and_deletes(member) -> None:
    row = grant(member, ConsentType.DATA_PROCESSING)
    body = row.body
    for attempt in (
        lambda: ConsentEvent.objects.update(position=7),
        lambda: ConsentEvent.objects.all().delete(),
        lambda: ConsentEventBody.objects.update(status="revoked"),
        lambda: ConsentEventBody.objects.all().delete(),
        row.save,
        row.delete,
        body.save,
        body.delete,
    ):
        with pytest.raises(PermissionError):
            attempt()
    # Past the model layer, the database still refuses an update.
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        models.QuerySet(ConsentEventBody).update(status="revoked")


def test_two_events_cannot_share_a_position(member) -> None:
    row = grant(member, ConsentType.DATA_PROCESSING)
    clash = ConsentEvent(
        tenant_id=row.tenant_id,
        member=member,
        position=row.position,
        fingerprint=row.fingerprint,
        prev_hash=row.prev_hash,
        chain_hash=row.chain_hash,
        recorded_at=row.recorded_at,
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        clash.save()


# ---------------------------------------------------------------- tampering is detected

OTHER_TIME = timezone.now().replace(year=2020, microsecond=0)

TAMPERING = [
    (BODY_TABLE, "kind", "opt-out"),
    (BODY_TABLE, "consent_type", "data_storage"),
    (BODY_TABLE, "status", "revoked"),
    (BODY_TABLE, "legal_basis", "contract"),
    (BODY_TABLE, "capture_method", "inline-prompt"),
    (BODY_TABLE, "terms_hash", "a" * 64),
    (BODY_TABLE, "witness", "Someone Else"),
    (BODY_TABLE, "nonce", "0" * 32),
    (BODY_TABLE, "nonce", "not-a-nonce"),
    (BODY_TABLE, "occurred_at", OTHER_TIME),
    (BODY_TABLE, "recorded_at", OTHER_TIME),
    (CHAIN_TABLE, "fingerprint", "b" * 64),
    (CHAIN_TABLE, "prev_hash", "c" * 64),
    (CHAIN_TABLE, "chain_hash", "d" * 64),
    (CHAIN_TABLE, "record_version", 2),
    (CHAIN_TABLE, "position", 99),
    (CHAIN_TABLE, "recorded_at", OTHER_TIME),
]


@pytest.mark.parametrize(
    ("table", "column", "value"), TAMPERING, ids=[f"{t}.{c}" for t, c, _ in TAMPERING]
)
def test_rewriting_any_stored_field_breaks_verification_at_that_event(
    member, table, column, value
) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    target = grant(
        member,
        MEDICAL,
        principal=as_operator(member),
        capture_method=CaptureMethod.OPERATOR_RECORDED,
        witness=OPERATOR_ID,
    )
    grant(member, ConsentType.DATA_STORAGE)
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) is None

    drop_triggers()
    if column.endswith("_at"):
        value = connection.ops.adapt_datetimefield_value(value)
    key = "id" if table == CHAIN_TABLE else "event_id"
    raw(
        f"UPDATE {table} SET {connection.ops.quote_name(column)} = %s WHERE {key} = %s",  # noqa: S608
        [value, target.id.hex if connection.vendor == "sqlite" else target.id],
    )
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) == 2


def test_a_deleted_chain_row_leaves_a_gap_that_verification_reports(member) -> None:
    for consent_type in (ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE, MEDICAL):
        grant(member, consent_type)
    drop_triggers()
    target = ConsentEvent.objects.get(member=member, position=2)
    key = target.id.hex if connection.vendor == "sqlite" else target.id
    raw(f"DELETE FROM {BODY_TABLE} WHERE event_id = %s", [key])  # noqa: S608
    raw(f"DELETE FROM {CHAIN_TABLE} WHERE id = %s", [key])  # noqa: S608
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) == 2


# ---------------------------------------------------------------- latest wins

TYPES = (ConsentType.DATA_PROCESSING, MEDICAL, ConsentType.MULTI_ACTOR_SENSITIVE)
ACTS = st.lists(
    st.tuples(
        st.sampled_from(TYPES),
        st.sampled_from(("granted", "revoked")),
        st.integers(min_value=0, max_value=5),  # hours ago: collisions exercise the tie-break
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(acts=ACTS, data=st.data())
def test_latest_act_wins_whatever_order_the_acts_are_recorded_in(tenant, acts, data) -> None:
    # Each example gets its own member: the database is not rolled back between examples.
    member = user_create(
        actor=Actor("system", "tests"), tenant=tenant, username=f"m-{User.objects.count()}"
    ).user
    now = timezone.now().replace(microsecond=0)
    arrival = data.draw(st.permutations(acts))
    # Reference model: per type, the act with the greatest (occurred_at, arrival) stands.
    standing: dict[str, tuple[tuple, str, object]] = {}
    for n, (consent_type, status, hours_ago) in enumerate(arrival):
        occurred_at = now - timedelta(hours=hours_ago)
        current = standing.get(consent_type)
        if status == "revoked" and (current is None or current[1] != "granted"):
            with pytest.raises(Conflict):
                grant(member, consent_type, status=status, occurred_at=occurred_at)
            continue
        row = grant(member, consent_type, status=status, occurred_at=occurred_at)
        if current is None or (occurred_at, n) > current[0]:
            standing[consent_type] = ((occurred_at, n), status, row.id)

    tenant_id = member.tenant_id
    expected = {t for t, (_, status, _) in standing.items() if status == "granted"}
    assert active_consent_types(tenant_id=tenant_id, member=member) == expected
    for consent_type in TYPES:
        current = standing.get(consent_type)
        want = current[2] if current and current[1] == "granted" else None
        got = current_consent_event_id(
            tenant_id=tenant_id, member=member, consent_type=consent_type
        )
        assert got == want
    assert verify_member_chain(tenant_id=tenant_id, member=member) is None


# ---------------------------------------------------------------- revocation cascade signal


@pytest.fixture
def revocations():
    received: list[dict] = []

    def receiver(sender, **kwargs):
        received.append(kwargs)

    sensitive_consent_revoked.connect(receiver, weak=False)
    yield received
    sensitive_consent_revoked.disconnect(receiver)


def test_a_sensitive_revocation_is_announced_once_and_only_after_commit(
    member, revocations, django_capture_on_commit_callbacks
) -> None:
    grant(member, MEDICAL)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        row = revoke(member, MEDICAL)
    assert revocations == []  # not inside the transaction
    for callback in callbacks:
        callback()
    assert len(revocations) == 1
    [sent] = revocations
    assert sent.pop("signal") is sensitive_consent_revoked
    assert sent == {
        "tenant_id": member.tenant_id,
        "member_id": member.pk,
        "member_public_id": member.public_id,
        "consent_type": MEDICAL,
        "categories": ["medical"],
        "event_id": row.id,
    }
    assert consent_audits()[-1].reason_code == "revocation-cascade"


def test_revoking_multi_actor_consent_announces_an_empty_category_list(
    member, revocations, django_capture_on_commit_callbacks
) -> None:
    grant(member, ConsentType.MULTI_ACTOR_SENSITIVE)
    with django_capture_on_commit_callbacks(execute=True):
        revoke(member, ConsentType.MULTI_ACTOR_SENSITIVE)
    assert [(r["consent_type"], r["categories"]) for r in revocations] == [
        ("multi_actor_sensitive", [])
    ]


def test_grants_general_revocations_and_overridden_revocations_announce_nothing(
    member, revocations, django_capture_on_commit_callbacks
) -> None:
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        grant(member, ConsentType.SENSITIVE_DATA)
        revoke(member, ConsentType.SENSITIVE_DATA)  # general: policy switches off, no delete
        grant(member, MEDICAL, occurred_at=now)
        # A paper revocation dated before the grant it would revoke changes nothing.
        revoke(member, MEDICAL, occurred_at=now - timedelta(days=3))
    assert revocations == []
    assert MEDICAL in active_consent_types(tenant_id=member.tenant_id, member=member)


def test_a_failing_listener_does_not_undo_the_committed_revocation(
    member, django_capture_on_commit_callbacks, caplog
) -> None:
    def broken(sender, **kwargs):
        raise RuntimeError("listener down")

    sensitive_consent_revoked.connect(broken, weak=False)
    try:
        grant(member, MEDICAL)
        with django_capture_on_commit_callbacks(execute=True):
            row = revoke(member, MEDICAL)
    finally:
        sensitive_consent_revoked.disconnect(broken)
    assert MEDICAL not in active_consent_types(tenant_id=member.tenant_id, member=member)
    assert str(row.id) in caplog.text


# ---------------------------------------------------------------- erasure


def test_purge_erases_the_bodies_keeps_the_chain_and_leaves_no_trace_anywhere(member) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    operator = as_operator(member)
    for status in ("granted", "revoked"):
        grant(
            member,
            MEDICAL,
            status=status,
            principal=operator,
            capture_method=CaptureMethod.OPERATOR_RECORDED,
            witness=OPERATOR_ID,
        )
    kept = grant(member, FINANCIAL)
    assert find_in_database(MEDICAL) == [(BODY_TABLE, "consent_type")]

    erased = consent_purge_categories(
        principal=iris(member),
        member=member,
        categories=["medical", "work"],
    )

    assert erased == 2
    assert not ConsentEventBody.objects.filter(witness=OPERATOR_ID).exists()
    assert find_in_database(MEDICAL) == []  # the category itself is gone, audit included
    assert ConsentEvent.objects.filter(member=member).count() == 4  # the chain is whole
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) is None
    types = active_consent_types(tenant_id=member.tenant_id, member=member)
    assert types == {ConsentType.DATA_PROCESSING, FINANCIAL}
    assert ConsentEventBody.objects.filter(event=kept).exists()
    audit = consent_audits()[-1]
    assert audit.action == "iris.consent.events.purged"
    assert audit.payload == {"erasedCount": 2, "categoryCount": 2, "droppedReplayCount": 0}


def test_the_chain_still_appends_and_verifies_after_a_purge(member) -> None:
    grant(member, MEDICAL)
    consent_purge_categories(principal=iris(member), member=member, categories=["medical"])
    row = grant(member, MEDICAL)
    assert row.position == 2
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) is None
    [event] = member_ledger(tenant_id=member.tenant_id, member=member)
    assert event.position == 2


def test_an_erased_row_is_still_checked_by_its_link(member) -> None:
    grant(member, MEDICAL)
    grant(member, ConsentType.DATA_PROCESSING)
    consent_purge_categories(principal=iris(member), member=member, categories=["medical"])
    drop_triggers()
    key = ConsentEvent.objects.get(position=1).id
    raw(
        f"UPDATE {CHAIN_TABLE} SET fingerprint = %s WHERE id = %s",  # noqa: S608
        ["e" * 64, key.hex if connection.vendor == "sqlite" else key],
    )
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) == 1


def test_purge_refuses_unknown_categories(member) -> None:
    with pytest.raises(ValidationFailed) as raised:
        consent_purge_categories(principal=iris(member), member=member, categories=["x"])
    assert raised.value.field == "categories" and "medical" in raised.value.allowed


def test_an_erasure_asked_by_anyone_but_iris_waits_for_the_owner_and_then_resumes(
    member, surface_token
) -> None:
    grant(member, MEDICAL)
    client = SurfaceClient.objects.get()
    surface = Principal("surface", client.id, client.tenant_id, surface=client.surface)
    with pytest.raises(HeldForApproval) as held:
        consent_purge_categories(principal=surface, member=member, categories=["medical"])
    assert ConsentEventBody.objects.count() == 1  # nothing erased while it waits
    approval = Approval.objects.get(id=held.value.extra["approvalId"])
    assert approval.operation == "consent.purge_categories"
    assert approval.arguments == {"categories": ["medical"]}
    assert "consent records" in approval.card_text

    outcome = approval_decide(
        principal=as_member(member), approval_id=approval.id, decision="approve"
    )

    assert outcome.resume_code == "completed" and outcome.result == 1
    assert not ConsentEventBody.objects.exists()
    effect = SideEffect.objects.get(operation="consent.purge_categories")
    assert effect.status == "done" and effect.counts == {"erased": 1, "droppedReplays": 0}
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) is None


# ---------------------------------------------------------------- concurrency


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_never_share_a_position(require_postgres, member) -> None:
    def writer() -> None:
        for _ in range(5):
            grant(member, ConsentType.DATA_PROCESSING)

    assert run_together(writer, threads=6) == []
    positions = list(
        ConsentEvent.objects.filter(member=member)
        .order_by("position")
        .values_list("position", flat=True)
    )
    assert positions == list(range(1, 31))
    arrivals = list(
        ConsentEvent.objects.filter(member=member)
        .order_by("position")
        .values_list("recorded_at", flat=True)
    )
    assert arrivals == sorted(arrivals)  # stamped under the lock
    assert verify_member_chain(tenant_id=member.tenant_id, member=member) is None


@pytest.mark.parametrize("as_json", [False, True], ids=["rows", "json"])
def test_the_ledger_read_within_another_statement_is_the_ledger(
    member, require_postgres, as_json
) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    recorded = CaptureMethod.OPERATOR_RECORDED
    grant(
        member, MEDICAL, principal=as_operator(member), capture_method=recorded, witness=OPERATOR_ID
    )
    grant(member, MEDICAL, status="revoked")
    grant(member, MEDICAL)
    grant(member, FINANCIAL)
    consent_purge_categories(principal=iris(member), member=member, categories=["financial"])
    sql, params = selectors.member_ledger_sql(tenant_id=member.tenant_id, member=member)
    with connection.cursor() as cursor:
        if as_json:  # as the recall's snapshot carries it (memory.recall.snapshot._catch_up)
            cursor.execute(f"SELECT json_agg(d) FROM ({sql}) AS d", params)  # noqa: S608
            rows = [tuple(r.values()) for r in cursor.fetchone()[0]]
        else:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    events = selectors.member_ledger_of(rows, member=member)
    whole = member_ledger(tenant_id=member.tenant_id, member=member)
    assert len(whole) == 4  # the erased grant is left out by both
    assert sorted(events, key=lambda e: e.position) == whole
    assert ledger.active_granted(events) == {ConsentType.DATA_PROCESSING, MEDICAL}
