"""The only writes to the consent ledger: append an event, and erase bodies on request.

Each public function is governed first (`govern`, outside the transaction so a denial
stays recorded), then opens the one durable transaction in which it writes the ledger and
its audit event. A revocation that must delete memory is announced after commit
(`consent.signals.sensitive_consent_revoked`).

Audit events carry ids, codes, counts and fingerprints. They do not name the sensitive
category a consent is about: that a member switched health memory on is itself health
data, the ledger body that says so can be erased, and the audit chain cannot. The audit
keeps the event id and fingerprint, which bind the (erasable) body without revealing it.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Iterable
from datetime import datetime
from functools import partial
from typing import Any, ClassVar

from django.db import transaction
from django.utils import timezone

from consent import capture, ledger
from consent.enums import (
    CATEGORY_CONSENT_PREFIX,
    CaptureMethod,
    Category,
    ConsentStatus,
    OptOutStatus,
    category_consent_type,
    is_sensitive,
)
from consent.ledger import ConsentRuleError, EventKind, LedgerEvent
from consent.models import ConsentEvent, ConsentEventBody
from consent.selectors import ledger_event
from consent.signals import sensitive_consent_revoked
from consent.terms import TERMS, current_terms, terms
from governance.actions import AuditAction
from governance.after_commit import after_commit
from governance.approvals import Resume
from governance.audit import audit_record
from governance.effects import run_destructive
from governance.errors import Conflict, ValidationFailed, invalid
from governance.models import IdempotencyRecord, User
from governance.pipeline import (
    Check,
    Decision,
    Effect,
    Hook,
    Operation,
    Verdict,
    govern,
    record_pending,
)
from governance.principal import Principal

log = logging.getLogger(__name__)

POLICY_ID = "iris-consent-ledger-v1"


class ConsentCaptureGate(Check):
    """Who may record what (`consent.capture.CAPTURE_TABLE`): the caller kind, the
    operator's role, the witness and the date. Registered by `consent.apps`; decides only
    operations that carry a `consentCapture` attribute (built by `_append`)."""

    name = "consent-capture"
    priority = 25  # after the secret screen: a credential in the witness is refused as such
    hooks: ClassVar[frozenset[Hook]] = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        facts = op.attributes.get("consentCapture")
        if facts is None:
            return None
        refusal = capture.capture_refusal(
            caller_kind=op.principal.kind,
            roles=op.principal.roles,
            capture_method=facts["captureMethod"],
            occurred_at=facts["occurredAt"],
            now=facts["now"],
            witness_is_caller=facts["witnessIsCaller"],
        )
        if refusal is None:
            return None
        error: dict[str, str | list[str]] = {
            "field": refusal.field,
            "rule": refusal.rule,
            "message": refusal.detail,
        }
        if refusal.allowed:
            error["allowed"] = list(refusal.allowed)
        return Decision(
            self.name, Verdict.DENY, refusal.rule, refusal.detail, extra={"errors": [error]}
        )


def consent_record(
    *,
    principal: Principal,
    member: User,
    consent_type: str,
    status: str,
    legal_basis: str,
    capture_method: str,
    terms_version: str | None = None,
    terms_hash: str | None = None,
    witness: str | None = None,
    occurred_at: datetime | None = None,
) -> ConsentEvent:
    """Grant or revoke one consent type for `member` (spec: appendIrisConsentEvent).

    Raises ValidationFailed (field, rule, allowed values) for input the ledger refuses and
    Conflict when revoking a type that is not currently granted; nothing is written then.
    Terms default to the current version; `terms_hash` records terms Iris never published
    (a data-rights import). Caller has resolved `member` within the principal's reach.
    """
    return _append(
        principal=principal,
        member=member,
        kind=EventKind.CONSENT,
        consent_type=consent_type,
        status=status,
        legal_basis=legal_basis,
        capture_method=capture_method,
        terms_version=terms_version,
        terms_hash=terms_hash,
        witness=witness,
        occurred_at=occurred_at,
    )


def opt_out_record(
    *,
    principal: Principal,
    member: User,
    category: str,
    status: str,
    legal_basis: str,
    capture_method: str,
    terms_version: str | None = None,
    terms_hash: str | None = None,
    witness: str | None = None,
    occurred_at: datetime | None = None,
) -> ConsentEvent:
    """Opt out of (or back into) one opt-out category; the same chain, the same rules.
    Opting back in when not opted out is a Conflict, like revoking what was never given."""
    return _append(
        principal=principal,
        member=member,
        kind=EventKind.OPT_OUT,
        consent_type=category,
        status=status,
        legal_basis=legal_basis,
        capture_method=capture_method,
        terms_version=terms_version,
        terms_hash=terms_hash,
        witness=witness,
        occurred_at=occurred_at,
    )


PURGE_OPERATION = "consent.purge_categories"
PURGE_ACTION = "erase your consent records for the sensitive topics named in a deletion request"


def consent_purge_categories(
    *,
    principal: Principal,
    member: User,
    categories: Iterable[str],
    approval_id: str | None = None,
    side_effect_id: str | None = None,
) -> int:
    """Erase the bodies of the member's consent events for these memory categories.

    For a data-rights deletion with `purgeConsentLedger`. The chain rows stay, with their
    fingerprints and links, so `verify_member_chain` still holds; the erased events drop out
    of every derivation (a category whose events are all erased reads as never granted,
    which fails closed). Stored idempotent answers that quote an erased event go too.
    Returns how many bodies were erased; categories without a consent type of their own
    (the non-sensitive ones) erase nothing.

    Erasure is destructive, so it runs the kernel's destructive path: governed at
    `pre_destructive` (a caller other than Iris itself waits for the owner's approval, and
    the approved call resumes through the registry, see `consent.apps`), then recorded in
    the side-effect ledger before it runs. Call it outside any transaction.
    """
    wanted = sorted(set(categories))
    allowed = tuple(c.value for c in Category)
    for category in wanted:
        if category not in allowed:
            raise ValidationFailed(
                f"Unknown category {category!r}.",
                field="categories",
                rule="unknown-category",
                allowed=allowed,
            )
    op = Operation(
        name=PURGE_OPERATION,
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        attributes={
            "arguments": {"categories": wanted},
            "approval_id": approval_id,
            "side_effect_id": side_effect_id,
        },
    )
    counts = run_destructive(op, _purge_in_one_transaction, principal, member, wanted)
    return counts["erased"]


def _purge_in_one_transaction(
    principal: Principal, member: User, categories: list[str]
) -> dict[str, int]:
    consent_types = sorted(category_consent_type(c) for c in categories if is_sensitive(c))
    with transaction.atomic(durable=True):
        _lock_chain(member)
        bodies = ConsentEventBody.objects.filter(
            tenant_id=member.tenant_id,
            event__member=member,
            consent_type__in=consent_types,
        )
        event_ids = [str(pk) for pk in bodies.values_list("event_id", flat=True)]
        erased = bodies.erase() if event_ids else 0
        # The API stores a POST's first answer for replay; those answers quote the body.
        dropped = 0
        if event_ids:
            dropped, _ = IdempotencyRecord.objects.filter(
                subject_id=member.public_id, response_body__id__in=event_ids
            ).delete()
        audit_record(
            actor=principal.actor,
            action=AuditAction.CONSENT_EVENTS_PURGED,
            tenant_id=member.tenant_id,
            policy_id=POLICY_ID,
            reason_code="data-rights-erasure",
            subject_ids=[member.public_id, *event_ids],
            payload={
                "erasedCount": erased,
                "categoryCount": len(categories),
                "droppedReplayCount": dropped,
            },
        )
    return {"erased": erased, "droppedReplays": dropped}


def resume_purge(call: Resume) -> int:
    """Issue an approved (or crashed) purge again from its stored arguments."""
    if call.principal.tenant_id is None or call.member_id is None:
        raise User.DoesNotExist("A purge is resumed for a member of a tenant.")  # as get() would
    member = User.objects.get(
        tenant_id=call.principal.tenant_id, public_id=call.member_id, kind=User.Kind.MEMBER
    )
    return consent_purge_categories(
        principal=call.principal,
        member=member,
        categories=call.arguments["categories"],
        approval_id=call.attributes["approval_id"],
        side_effect_id=call.attributes["side_effect_id"],
    )


# ---------------------------------------------------------------- internals


def _append(
    *,
    principal: Principal,
    member: User,
    kind: EventKind,
    consent_type: str,
    status: str,
    legal_basis: str,
    capture_method: str,
    terms_version: str | None,
    terms_hash: str | None,
    witness: str | None,
    occurred_at: datetime | None,
) -> ConsentEvent:
    if (
        capture_method == CaptureMethod.OPERATOR_RECORDED
        and principal.kind == "operator"
        and witness is None
    ):
        witness = str(principal.id)  # the operator recording it is the witness
    resolved_terms = _terms_hash(terms_version, terms_hash)
    recorded_at = timezone.now()
    fields: dict[str, Any] = {
        "kind": kind,
        "consent_type": consent_type,
        "status": status,
        "legal_basis": legal_basis,
        "capture_method": capture_method,
        "terms_hash": resolved_terms,
        "witness": witness,
    }
    # Refuse bad input before governance and before any lock: nothing is written for it.
    try:
        ledger.validate_event_fields(
            **fields, occurred_at=occurred_at or recorded_at, recorded_at=recorded_at
        )
    except ConsentRuleError as exc:
        raise invalid(exc, detail=f"{exc.field} is not valid ({exc.rule}).") from None

    decided: list[dict[str, Any]] = []
    govern(
        Hook.PRE_WRITE,
        Operation(
            name="consent.record" if kind == EventKind.CONSENT else "consent.opt_out",
            effect=Effect.WRITE,
            principal=principal,
            tenant_id=member.tenant_id,
            member_id=member.public_id,
            attributes={
                # Enum values only: the kernel may fingerprint and store these.
                "arguments": {"consentType": str(consent_type), "status": str(status)},
                "consentCapture": {
                    "captureMethod": str(capture_method),
                    "occurredAt": occurred_at or recorded_at,
                    "now": recorded_at,
                    "witnessIsCaller": witness is not None and witness == str(principal.id),
                },
            },
            # The witness is the only free text an event stores; the rest are enums.
            texts={"witness": witness},
        ),
        pending=decided,
    )

    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with the event it allowed, or not at all
        _lock_chain(member)
        # A member's consent history is short (tens of events), so the whole chain is read:
        # the conflict rule and the cascade rule both need the full derivation.
        rows = list(
            ConsentEvent.objects.filter(tenant_id=member.tenant_id, member=member)
            .select_related("body")
            .order_by("position")
        )
        history = [e for e in map(partial(ledger_event, member=member), rows) if e is not None]
        head = rows[-1] if rows else None
        # Stamp the arrival under the lock, so recorded_at never runs backwards in a chain.
        recorded_at = timezone.now()
        event = ledger.build_event(
            member_id=str(member.public_id),
            position=head.position + 1 if head else 1,
            **fields,
            occurred_at=occurred_at or recorded_at,
            recorded_at=recorded_at,
        )
        _refuse_withdrawing_nothing(history, event)
        nonce = secrets.token_hex(16)
        sealed = ledger.seal(event, head.chain_hash if head else ledger.GENESIS_HASH, nonce=nonce)

        row = ConsentEvent(
            id=uuid.UUID(event.event_id),
            tenant_id=member.tenant_id,
            member=member,
            position=event.position,
            record_version=event.record_version,
            fingerprint=sealed.fingerprint,
            prev_hash=sealed.prev_hash,
            chain_hash=sealed.chain_hash,
            recorded_at=event.recorded_at,
        )
        row.save()
        ConsentEventBody(
            event=row,
            tenant_id=member.tenant_id,
            kind=event.kind,
            consent_type=event.consent_type,
            status=event.status,
            legal_basis=event.legal_basis,
            capture_method=event.capture_method,
            terms_hash=event.terms_hash,
            witness=event.witness,
            nonce=nonce,
            occurred_at=event.occurred_at,
            recorded_at=event.recorded_at,
        ).save()

        cascade = ledger.cascade_due(history, event)
        audit_record(
            actor=principal.actor,
            action=AuditAction.CONSENT_EVENT_APPENDED,
            tenant_id=member.tenant_id,
            policy_id=POLICY_ID,
            reason_code="revocation-cascade" if cascade else "",
            subject_ids=[member.public_id, row.id],
            payload={
                "kind": event.kind,
                "consentType": _audited_type(event.consent_type),
                "status": event.status,
                "captureMethod": event.capture_method,
                "position": event.position,
                "fingerprint": sealed.fingerprint,
                "cascade": cascade,
            },
        )
        if cascade:
            after_commit(
                _announce_revocation,
                tenant_id=member.tenant_id,
                member_id=member.pk,
                member_public_id=member.public_id,
                consent_type=event.consent_type,
                categories=sorted(str(c) for c in ledger.cascade_categories(event.consent_type)),
                event_id=row.id,
            )
    return row


def _lock_chain(member: User) -> None:
    """Serialise writers of one member's chain: two appends must not read the same head.

    The member row is the lock (PostgreSQL row lock; SQLite serialises writers itself);
    the unique (tenant, member, position) constraint backstops it.
    """
    User.objects.select_for_update().filter(pk=member.pk).values_list("pk", flat=True).get()


def _refuse_withdrawing_nothing(history: list[LedgerEvent], event: LedgerEvent) -> None:
    if event.kind == EventKind.CONSENT and event.status == ConsentStatus.REVOKED:
        if event.consent_type not in ledger.active_granted(history):
            raise Conflict(
                f"Consent {event.consent_type} is not currently granted, so there is "
                "nothing to revoke.",
                code="consent-not-granted",
                field="consent_type",
                rule="not-currently-granted",
            )
    if event.kind == EventKind.OPT_OUT and event.status == OptOutStatus.OPTED_IN:
        if event.consent_type not in ledger.opted_out(history):
            raise Conflict(
                f"There is no opt-out of {event.consent_type} in force to lift.",
                code="not-opted-out",
                field="consent_type",
                rule="not-currently-opted-out",
            )


def _terms_hash(terms_version: str | None, terms_hash: str | None) -> str:
    if terms_version is None:
        return terms_hash if terms_hash is not None else current_terms().hash
    try:
        published = terms(terms_version).hash
    except KeyError:
        raise ValidationFailed(
            f"Unknown terms version {terms_version!r}.",
            field="terms_version",
            rule="unknown-terms-version",
            allowed=tuple(TERMS),
        ) from None
    if terms_hash is not None and terms_hash != published:
        raise ValidationFailed(
            "The terms hash does not match the terms version.",
            field="terms_hash",
            rule="terms-hash-mismatch",
            allowed=(published,),
        )
    return published


def _audited_type(consent_type: str) -> str:
    """The consent type as the audit may name it: per-category types stay in the ledger."""
    if consent_type.startswith(CATEGORY_CONSENT_PREFIX):
        return CATEGORY_CONSENT_PREFIX + "*"
    return consent_type


def _announce_revocation(**kwargs: object) -> None:
    for receiver, result in sensitive_consent_revoked.send_robust(sender=ConsentEvent, **kwargs):
        if isinstance(result, Exception):
            log.error(
                "sensitive_consent_revoked receiver %s failed for consent event %s",
                getattr(receiver, "__qualname__", receiver),
                kwargs.get("event_id"),
                exc_info=result,
            )
