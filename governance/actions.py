"""Every audit action Iris records, named once.

An action is `iris.<area>.<thing>.<outcome>`: the area is the part of Iris that acts
(`account`, `admin_inspection`, `consent`, `dsar`, `governance`, `memory`, `vault`), the
thing is what it acted on, and the outcome is a past-tense verb, with a word before it
where the verb alone would not say what happened (`enrolment_started`, `scope_changed`,
`retention_review_flagged`). Two exceptions, both names other systems filter on: the
kernel's decision events end in the verdict itself (`allow`, `deny`, `ask`), and the
inspection state machine's event is the spec's canonical `iris.admin_inspection.transition`
(three parts, ending in a noun; the audit platform's consumers match it exactly, and the
move it records is in its payload: `from`, `to`).

The governance kernel holds the whole list, apps included: the names are plain strings,
so governance imports no app to know them, and one file is where a reader finds them.
Stored rows keep the name they were written with (the chain is append-only): a renamed
action keeps its former names in `FORMER_NAMES`, and a reader whose old rows matter
filters by `stored_names`. docs/decisions/layout.md ("Audit actions") says more.
"""

from __future__ import annotations

from enum import StrEnum


class AuditAction(StrEnum):
    description: str

    def __new__(cls, value: str, description: str) -> AuditAction:
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        return member

    # Accounts (governance.accounts, governance.login_signals)
    ACCOUNT_LOGIN_SUCCEEDED = "iris.account.login.succeeded", "an operator or member signed in"
    ACCOUNT_LOGIN_FAILED = "iris.account.login.failed", "a sign-in was refused"
    ACCOUNT_LOGIN_LOCKED_OUT = (
        "iris.account.login.locked_out",
        "too many failed sign-ins locked an account out",
    )
    ACCOUNT_TOTP_ENROLMENT_STARTED = (
        "iris.account.totp.enrolment_started",
        "an operator began enrolling an authenticator",
    )
    ACCOUNT_TOTP_ENROLLED = "iris.account.totp.enrolled", "an authenticator was confirmed"
    ACCOUNT_TOTP_RESET = "iris.account.totp.reset", "an operator's authenticator was removed"

    # The governance kernel
    GOVERNANCE_DECISION_ALLOW = (
        "iris.governance.decision.allow",
        "the kernel let an operation through",
    )
    GOVERNANCE_DECISION_DENY = "iris.governance.decision.deny", "the kernel refused an operation"
    GOVERNANCE_DECISION_ASK = (
        "iris.governance.decision.ask",
        "the kernel held an operation until the member answers",
    )
    GOVERNANCE_APPROVAL_REQUESTED = (
        "iris.governance.approval.requested",
        "an operation was held for the member's approval",
    )
    GOVERNANCE_APPROVAL_APPROVED = (
        "iris.governance.approval.approved",
        "the member approved a held operation",
    )
    GOVERNANCE_APPROVAL_DENIED = (
        "iris.governance.approval.denied",
        "the member refused a held operation",
    )
    GOVERNANCE_APPROVAL_EXPIRED = (
        "iris.governance.approval.expired",
        "a held operation was not answered in time",
    )
    GOVERNANCE_APPROVAL_CONSUMED = (
        "iris.governance.approval.consumed",
        "an approved operation ran on its approval",
    )
    GOVERNANCE_SIDE_EFFECT_COMPLETED = (
        "iris.governance.side_effect.completed",
        "an interrupted side effect was resumed to its end",
    )
    GOVERNANCE_SIDE_EFFECT_FAILED = (
        "iris.governance.side_effect.failed",
        "an interrupted side effect could not be resumed",
    )
    GOVERNANCE_RUN_STEP_RECORDED = (
        "iris.governance.run.step_recorded",
        "a step of an agent run was counted against its limits",
    )
    GOVERNANCE_TENANT_CREATED = "iris.governance.tenant.created", "a tenant was created"
    GOVERNANCE_USER_CREATED = "iris.governance.user.created", "a member or operator was created"
    GOVERNANCE_SURFACE_CLIENT_CREATED = (
        "iris.governance.surface_client.created",
        "a surface client and its key were issued",
    )
    GOVERNANCE_SURFACE_CLIENT_REVOKED = (
        "iris.governance.surface_client.revoked",
        "a surface client's key was revoked",
    )

    # Webhooks (events): endpoints a tenant declares, deliveries that gave up
    GOVERNANCE_WEBHOOK_CREATED = (
        "iris.governance.webhook.created",
        "a tenant declared a webhook endpoint and its signing secret was vaulted",
    )
    GOVERNANCE_WEBHOOK_DEACTIVATED = (
        "iris.governance.webhook.deactivated",
        "a webhook endpoint was switched off; nothing more is posted to it",
    )
    GOVERNANCE_WEBHOOK_DELIVERY_FAILED = (
        "iris.governance.webhook_delivery.failed",
        "an event could not be delivered to a webhook endpoint and Iris stopped trying",
    )

    # The vault
    VAULT_SECRET_STORED = "iris.vault.secret.stored", "a secret was sealed into the vault"
    VAULT_SECRET_DELETED = "iris.vault.secret.deleted", "a secret was removed from the vault"
    VAULT_OWNER_PURGED = "iris.vault.owner.purged", "every secret of one owner was removed"
    VAULT_KEYS_ROTATED = "iris.vault.keys.rotated", "the vault's secrets were sealed anew"

    # Consent
    CONSENT_EVENT_APPENDED = (
        "iris.consent.event.appended",
        "a consent or opt-out event joined a member's ledger",
    )
    CONSENT_EVENTS_PURGED = (
        "iris.consent.events.purged",
        "a member's consent ledger was purged",
    )

    # Memory
    MEMORY_ENTRY_WRITTEN = "iris.memory.entry.written", "a memory was written"
    MEMORY_ENTRY_CORRECTED = "iris.memory.entry.corrected", "a memory was corrected"
    MEMORY_ENTRY_PROMOTED = (
        "iris.memory.entry.promoted",
        "a memory was written to or moved into the member's profile",
    )
    MEMORY_ENTRY_PAUSED = "iris.memory.entry.paused", "a memory was paused"
    MEMORY_ENTRY_RESUMED = "iris.memory.entry.resumed", "a paused memory was resumed"
    MEMORY_ENTRY_SCOPE_CHANGED = (
        "iris.memory.entry.scope_changed",
        "a memory was moved to another scope",
    )
    MEMORY_ENTRY_FORGOTTEN = "iris.memory.entry.forgotten", "a memory was forgotten"
    MEMORY_ENTRY_RESTORED = (
        "iris.memory.entry.restored",
        "a forgotten memory was brought back inside its soft-delete grace window",
    )
    MEMORY_ENTRY_HARD_DELETED = (
        "iris.memory.entry.hard_deleted",
        "a memory and its revisions were deleted for good",
    )
    MEMORY_ENTRY_RETENTION_REVIEW_FLAGGED = (
        "iris.memory.entry.retention_review_flagged",
        "a memory past its retention window was queued for a person's review",
    )
    MEMORY_WRITE_DROPPED = (
        "iris.memory.write.dropped",
        "a write was dropped before it became a memory",
    )
    MEMORY_INFERENCE_OBSERVED = (
        "iris.memory.inference.observed",
        "an inference was seen again and counted towards promotion",
    )
    MEMORY_CONFLICT_RAISED = (
        "iris.memory.conflict.raised",
        "a write contradicted a memory and waits for the member",
    )
    MEMORY_CONFLICT_RESOLVED = (
        "iris.memory.conflict.resolved",
        "the conflict ladder settled a contradiction on its own",
    )
    MEMORY_CONFLICT_ANSWERED = (
        "iris.memory.conflict.answered",
        "the member answered a pending conflict",
    )
    MEMORY_CONFLICT_EXPIRED = (
        "iris.memory.conflict.expired",
        "a pending conflict went unanswered past its window",
    )
    MEMORY_OFF_THE_RECORD_ENABLED = (
        "iris.memory.off_the_record.enabled",
        "a member went off the record",
    )
    MEMORY_OFF_THE_RECORD_DISABLED = (
        "iris.memory.off_the_record.disabled",
        "a member came back on the record",
    )
    MEMORY_ACTOR_FORGOTTEN = (
        "iris.memory.actor.forgotten",
        "every memory that mentions one person was forgotten",
    )
    MEMORY_CONSENT_CASCADE_COMPLETED = (
        "iris.memory.consent_cascade.completed",
        "memory covered by a revoked consent was deleted",
    )
    MEMORY_RECALL_RESOLVED = (
        "iris.memory.recall.resolved",
        "a recall answered, naming every entry it returned",
    )
    MEMORY_CONTINUATION_WRITTEN = (
        "iris.memory.continuation.written",
        "a device saved a continuation token",
    )
    MEMORY_CONTINUATION_SUPERSEDED = (
        "iris.memory.continuation.superseded",
        "a device's save lost to a newer one from another device",
    )
    MEMORY_CONTINUATION_FORGOTTEN = (
        "iris.memory.continuation.forgotten",
        "the member removed continuation tokens",
    )
    MEMORY_CONTINUATION_PURGED = (
        "iris.memory.continuation.purged",
        "continuation tokens lost their consent and were removed",
    )
    MEMORY_CONTINUATION_EXPIRED = (
        "iris.memory.continuation.expired",
        "continuation tokens outlived their lifetime and were removed",
    )

    # Data rights (dsar)
    DSAR_REQUEST_SUBMITTED = (
        "iris.dsar.request.submitted",
        "a member's data-rights request was received",
    )
    DSAR_REQUEST_TRANSITIONED = (
        "iris.dsar.request.transitioned",
        "a data-rights request moved to another state of its lifecycle",
    )
    DSAR_REQUEST_EXTENDED = (
        "iris.dsar.request.extended",
        "a data-rights deadline was extended once, with the reason given to the member",
    )
    DSAR_REQUEST_REMINDED = (
        "iris.dsar.request.reminded",
        "a data-rights request near its deadline was flagged to the legal queue",
    )
    DSAR_CODE_SENT = "iris.dsar.code.sent", "a verification code was sent to the member"
    DSAR_CODE_REFUSED = (
        "iris.dsar.code.refused",
        "a verification code was wrong, expired, used or tried too often",
    )
    DSAR_EXPORT_BUILT = "iris.dsar.export.built", "an export bundle was built and signed"
    DSAR_EXPORT_DOWNLOADED = "iris.dsar.export.downloaded", "an export bundle was downloaded"
    DSAR_EXPORT_EXPIRED = (
        "iris.dsar.export.expired",
        "an export bundle's download window ended and its file was deleted",
    )
    DSAR_DELETION_APPLIED = (
        "iris.dsar.deletion.applied",
        "a deletion request removed the memory and consent records it named",
    )
    DSAR_DELETION_UNDONE = (
        "iris.dsar.deletion.undone",
        "a soft deletion was undone inside its grace window",
    )
    DSAR_DELETION_PURGED = (
        "iris.dsar.deletion.purged",
        "a soft deletion's grace window ended and its memory was deleted for good",
    )
    DSAR_ERASURES_REAPPLIED = (
        "iris.dsar.erasures.reapplied",
        "erasures recorded in the journal were applied again after a restore",
    )
    DSAR_ACCESS_VIEWED = (
        "iris.dsar.access.viewed",
        "a member viewed everything Iris holds about them",
    )
    DSAR_LEGAL_HOLD_PLACED = "iris.dsar.legal_hold.placed", "a legal hold was placed on a member"
    DSAR_LEGAL_HOLD_LIFTED = "iris.dsar.legal_hold.lifted", "a legal hold was lifted"
    DSAR_JURISDICTION_SET = (
        "iris.dsar.jurisdiction.set",
        "a tenant's data-rights jurisdiction (GDPR or CCPA) was set",
    )

    # Operator inspection (inspection): the spec's canonical name first (see above).
    ADMIN_INSPECTION_TRANSITION = (
        "iris.admin_inspection.transition",
        "an operator inspection moved along its state machine (or was requested)",
    )
    ADMIN_INSPECTION_SNAPSHOT_VIEWED = (
        "iris.admin_inspection.snapshot.viewed",
        "an operator read the memory snapshot an inspection granted",
    )
    ADMIN_INSPECTION_SNAPSHOT_REPLAYED = (
        "iris.admin_inspection.snapshot.replayed",
        "an auditor reconstructed a granted snapshot as it was seen",
    )
    ADMIN_INSPECTION_NOTICE_QUEUED = (
        "iris.admin_inspection.notice.queued",
        "a sensitive read was closed and the member is owed a notice within 72 hours",
    )
    ADMIN_INSPECTION_NOTICE_DELIVERED = (
        "iris.admin_inspection.notice.delivered",
        "the member was told that an operator read their memory",
    )
    ADMIN_INSPECTION_INCIDENT_REFERENCE_ISSUED = (
        "iris.admin_inspection.incident_reference.issued",
        "trust and safety issued a signed, single-use incident reference for a member",
    )
    ADMIN_INSPECTION_POLICY_SET = (
        "iris.admin_inspection.policy.set",
        "a tenant's inspection time boxes (grant and pending hours) were set",
    )


# Names rows were once written with. The chain never changes, so these rows keep them.
FORMER_NAMES: dict[AuditAction, tuple[str, ...]] = {
    AuditAction.MEMORY_RECALL_RESOLVED: ("memory.recall.resolved",),
    AuditAction.MEMORY_ENTRY_RETENTION_REVIEW_FLAGGED: ("iris.memory.entry.retention_review_due",),
    AuditAction.GOVERNANCE_TENANT_CREATED: ("iris.tenant.created",),
    AuditAction.GOVERNANCE_USER_CREATED: ("iris.user.created",),
    AuditAction.GOVERNANCE_SURFACE_CLIENT_CREATED: ("iris.surface_client.created",),
    AuditAction.GOVERNANCE_SURFACE_CLIENT_REVOKED: ("iris.surface_client.revoked",),
}


def stored_names(action: AuditAction) -> tuple[str, ...]:
    """Every name an event of `action` may be stored under: for `action__in=` filters."""
    return (action.value, *FORMER_NAMES.get(action, ()))


_DECISIONS = {
    "allow": AuditAction.GOVERNANCE_DECISION_ALLOW,
    "deny": AuditAction.GOVERNANCE_DECISION_DENY,
    "ask": AuditAction.GOVERNANCE_DECISION_ASK,
}


def decision_action(verdict: str) -> AuditAction:
    """The kernel's decision event for a verdict of `governance.pipeline.Verdict`."""
    return _DECISIONS[verdict]
