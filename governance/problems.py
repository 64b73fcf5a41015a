"""Every problem `code` the API can answer with, its HTTP status and what it means.

The OpenAPI schema documents each operation's problems from this table (its views name
the codes they can raise; `iris_site.openapi` adds the ones every call can meet), and
`tests/api/test_problem_codes.py` holds the table to the code: every code literal raised
anywhere in Iris is here with the same status, and nothing here is raised nowhere.
Plain Python: the meanings are written for the developer of a surface.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProblemCode:
    code: str
    status: int
    meaning: str


_TABLE: tuple[ProblemCode, ...] = (
    # -- every call ------------------------------------------------------------------------
    ProblemCode(
        "validation-failed",
        400,
        "A field breaks a rule; `errors[]` names each `field` and `rule` (and the `allowed` "
        "values of an enum). Nothing was written.",
    ),
    ProblemCode("malformed-request", 400, "The body is not a JSON object Iris can read."),
    ProblemCode("not-authenticated", 401, "No valid surface token (or session) was sent."),
    ProblemCode(
        "not-found",
        404,
        "No such resource for this caller: another member's or tenant's looks the same as "
        "one that does not exist.",
    ),
    ProblemCode("method-not-allowed", 405, "The path does not take this method."),
    ProblemCode("not-acceptable", 406, "The `Accept` header asks for something but JSON."),
    ProblemCode("payload-too-large", 413, "The body is larger than the server accepts."),
    ProblemCode("unsupported-media-type", 415, "The body must be `application/json`."),
    ProblemCode(
        "idempotency-key-reused",
        422,
        "This `Idempotency-Key` was used before with a different request.",
    ),
    ProblemCode(
        "idempotency-in-progress",
        409,
        "A request with this `Idempotency-Key` is still running; retry after a moment.",
    ),
    ProblemCode("rate-limited", 429, "Too many requests; wait for the seconds in `Retry-After`."),
    ProblemCode("forbidden", 403, "This caller may not do this."),
    ProblemCode("conflict", 409, "The request conflicts with the current state."),
    # -- the governance kernel ---------------------------------------------------------------
    ProblemCode(
        "held-for-approval",
        202,
        "Nothing happened yet: the member must approve this call first. The body carries "
        "`approvalId` and the `card` the member reads; once approved, Iris runs the call "
        "itself (or the surface repeats it with `approvalId`).",
    ),
    ProblemCode("governance-denied", 403, "Refused by the governance kernel."),
    ProblemCode(
        "cannot-pause",
        403,
        "The call needs the member's approval but the caller said it cannot wait "
        "(`canPause: false`).",
    ),
    ProblemCode(
        "taint-cannot-pause",
        403,
        "The run read outside text, so this change needs the member's approval, but the "
        "caller said it cannot wait (`canPause: false`).",
    ),
    ProblemCode("no-owner-to-ask", 403, "Nobody can approve this call."),
    ProblemCode("approval-arguments-invalid", 403, "The call cannot be held for approval."),
    ProblemCode("side-effect-ledger-off", 403, "Destructive calls are off on this server."),
    ProblemCode("side-effect-arguments-invalid", 403, "The call's arguments cannot be recorded."),
    ProblemCode("tenant-mismatch", 403, "The call names another tenant."),
    ProblemCode("not-owner", 403, "A member may act on their own memory only."),
    ProblemCode(
        "secret-in-memory",
        403,
        "The text looks like a credential (key, token, password); Iris never stores one "
        "as memory. `errors[]` names the field.",
    ),
    ProblemCode("run-id-invalid", 403, "`runId` is not a UUID."),
    ProblemCode("run-recall-limit", 403, "This run recalled too often."),
    ProblemCode("run-write-limit", 403, "This run wrote too often."),
    ProblemCode("run-loop-detected", 403, "This run keeps flipping the same memory."),
    ProblemCode("egress-unknown-tier", 403, "The destination tier must be `local` or `cloud`."),
    ProblemCode("egress-unfiltered", 403, "The answer holds data that may not reach this tier."),
    ProblemCode("approval-already-decided", 409, "The member already answered this approval."),
    ProblemCode("approval-expired", 409, "The approval expired before it was answered."),
    # -- memory ------------------------------------------------------------------------------
    ProblemCode(
        "memory-conflict",
        409,
        "The new memory contradicts one the member stated. Nothing was written: ask the "
        "member the `question` in the body and send their answer to "
        "`POST /api/v1/memories/conflicts/{conflictId}/answer`.",
    ),
    ProblemCode(
        "off-the-record",
        409,
        "The member has paused memory (off the record) for this session or surface; "
        "nothing was written.",
    ),
    ProblemCode(
        "sensitive-category-without-consent",
        403,
        "The category is sensitive and the member has not consented to it: record the "
        "member's consent first (`POST /api/v1/consents`).",
    ),
    ProblemCode(
        "scope-suppressed",
        403,
        "This scope is not enabled for the member; `notes` says why.",
    ),
    ProblemCode(
        "consumer-not-allowed", 403, "This surface may not use memory of this adapter scope."
    ),
    ProblemCode(
        "surface-forbidden", 403, "The `surface` named in the request is not this caller's."
    ),
    ProblemCode(
        "destination-tier-wider-than-client",
        403,
        "`destinationTier` may narrow the surface client's tier, never widen it.",
    ),
    ProblemCode(
        "control-set-by-member",
        403,
        "The member set this pause or off-the-record switch; only they can lift it.",
    ),
    ProblemCode(
        "control-set-by-another-caller",
        403,
        "Another surface set this pause or off-the-record switch; only it or the member "
        "can lift it.",
    ),
    ProblemCode(
        "entry-tombstoned", 409, "The memory was forgotten; nothing can be written into it."
    ),
    ProblemCode(
        "read-only-copy", 409, "This is a read-only copy of a tenant memory; change the original."
    ),
    ProblemCode(
        "memory-changed",
        409,
        "The memory changed since the caller read it; read it again and retry.",
    ),
    ProblemCode("not-active", 409, "Only an active memory can be paused."),
    ProblemCode("not-paused", 409, "Only a paused memory can be resumed."),
    ProblemCode("not-forgotten", 409, "Only a forgotten memory can be restored."),
    ProblemCode("grace-window-passed", 409, "The memory was forgotten too long ago to restore."),
    ProblemCode(
        "restore-conflict", 409, "A newer memory took this one's place; it cannot be restored."
    ),
    ProblemCode(
        "scope-change-conflict",
        409,
        "The target scope already holds a memory on this subject.",
    ),
    ProblemCode(
        "scope-change-not-allowed",
        409,
        "Memory moves only session to profile or notebook, profile to notebook, and tenant "
        "to notebook (as a read-only copy).",
    ),
    ProblemCode("same-scope", 409, "The memory is already in that scope."),
    ProblemCode(
        "tenant-memory-never-consumer-profile",
        409,
        "A tenant memory never moves into the member's profile.",
    ),
    ProblemCode("conflict-closed", 409, "This question was already answered."),
    ProblemCode("conflict-expired", 409, "This question expired; write the memory again."),
    ProblemCode(
        "conflict-stale",
        409,
        "The memory behind this question changed since; write the memory again.",
    ),
    ProblemCode(
        "cross-device-sync-off",
        403,
        "The member has not turned on cross-device sync, so no continuation token is kept.",
    ),
    # -- consent -----------------------------------------------------------------------------
    ProblemCode(
        "consent-not-granted", 409, "The consent is not currently granted; nothing to revoke."
    ),
    ProblemCode("not-opted-out", 409, "There is no opt-out in force to lift."),
    ProblemCode(
        "capture-method-not-allowed",
        403,
        "This caller may not record consent captured this way; a surface records "
        "`inline-prompt` consent (`errors[].allowed` lists what it may use).",
    ),
    ProblemCode(
        "capture-role-not-allowed", 403, "Only support and legal record witnessed consent."
    ),
    ProblemCode(
        "witness-must-be-recorder",
        403,
        "The witness of an operator-recorded consent is the operator recording it.",
    ),
    ProblemCode("capture-future-dated", 403, "`occurredAt` may not be in the future."),
    ProblemCode("capture-backdated", 403, "`occurredAt` is too far in the past."),
    # -- data rights -------------------------------------------------------------------------
    ProblemCode("open-request-exists", 409, "The member already has an open request of this kind."),
    ProblemCode("transition-not-permitted", 403, "This move is not allowed for this caller."),
    ProblemCode("legal-role-required", 403, "Only the legal role may do this."),
    ProblemCode("legal-hold", 403, "A legal hold stops this request."),
    ProblemCode("legal-hold-exists", 409, "A legal hold is already in place."),
    ProblemCode("work-not-finished", 409, "The request's work has not finished yet."),
    ProblemCode("not-awaiting-verification", 409, "The request is not waiting for verification."),
    ProblemCode("no-contact-address", 409, "There is no address to send a code to."),
    ProblemCode("verification-failed", 400, "The verification code is wrong or expired."),
    ProblemCode("request-not-open", 409, "The request is closed."),
    ProblemCode("deletion-not-started", 409, "The deletion has not started."),
    ProblemCode("not-a-soft-delete", 409, "Only a soft deletion can be undone."),
    ProblemCode("undo-window-closed", 409, "The window to undo the deletion has closed."),
    ProblemCode("bundle-not-ready", 409, "The export bundle is not ready yet."),
    ProblemCode("bundle-expired", 410, "The export bundle expired and was removed."),
    # -- accounts and keys (pages and commands, listed so the table is whole) ---------------
    ProblemCode("surface-client-not-found", 404, "No such surface client."),
    ProblemCode("vault-not-found", 404, "No such vault handle."),
    ProblemCode("vault-unreadable", 500, "A stored secret cannot be decrypted."),
    ProblemCode("totp-operators-only", 409, "Two-step sign-in is for operators."),
    ProblemCode("totp-enrolled", 409, "Two-step sign-in is already set up."),
    ProblemCode("unknown-hook", 400, "Not a governance hook."),
    ProblemCode("service-unavailable", 503, "Iris cannot serve this now; retry later."),
    ProblemCode("unprocessable", 422, "The request cannot be processed as it stands."),
    # -- events and webhooks -----------------------------------------------------------------
    ProblemCode("events-surface-only", 403, "Events are read with a surface client's token."),
    ProblemCode("webhooks-admin-only", 403, "Only an administrator declares webhooks."),
    ProblemCode("webhook-not-found", 404, "No such webhook for this tenant."),
)

PROBLEMS: dict[str, ProblemCode] = {p.code: p for p in _TABLE}
if len(PROBLEMS) != len(_TABLE):  # pragma: no cover - a duplicate is a bug in the table
    raise RuntimeError("a problem code is listed twice")


def problems_by_status(codes: Iterable[str]) -> dict[int, list[ProblemCode]]:
    """The given codes grouped by status, each group in the order given, once each."""
    grouped: dict[int, list[ProblemCode]] = {}
    for code in dict.fromkeys(codes):
        problem = PROBLEMS[code]  # KeyError: an operation names a code the table lacks
        grouped.setdefault(problem.status, []).append(problem)
    return grouped
