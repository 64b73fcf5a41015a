"""What the schema tells a surface developer about each operation: its tag, summary,
description and the problem codes only it can answer with (`iris_site.openapi` adds the
ones every call can meet). One table so the words read as one guide; the operation ids
are the views' own and never change (clients are generated from them).

`tests/api/test_schema_truth.py` fails when an operation is missing here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEMO_MEMBER = "7f3b2c1a-9d4e-4f6a-8b5c-2e1d0a9f8c7b"  # seed_demo's member: examples work as sent

APPROVALS_RULE = (
    "**Approvals.** Two kinds of call wait for the member's approval instead of running: "
    "destructive ones (forget every mention of a person, clear all memory or a whole "
    "category, delete for good), from every caller but Iris's own jobs; and a correction, "
    "forget or restore from a surface whose run (`runId`) reported a step that read "
    "outside text (`POST /api/v1/runs/{runId}/steps`). Such a call answers **202** "
    "`held-for-approval` with `approvalId` and the `card` the member sees on their "
    "Approvals page; nothing has happened yet. A destructive call, or a held forget or "
    "restore, runs by itself once approved; a held correction is sent again with "
    "`approvalId`. A caller that cannot "
    "wait sends `canPause: false` and gets 403 (`cannot-pause`, `taint-cannot-pause`) "
    "instead. Forgetting one memory outside such a run is not destructive: it applies at "
    "once, and the text is erased for good 14 days later."
)

GOVERNED_FIELDS = (
    "Optional governance fields: `runId` (the surface's run, for taint and run limits), "
    "`approvalId` (repeat a call the member approved), `canPause` (false: refuse rather "
    "than wait for an approval)."
)


@dataclass(frozen=True)
class Example:
    """A request that works as sent against a fresh demo (`make run`): its body, or its
    query for a GET or DELETE, and the status (and problem code) it answers with.
    `tests/api/test_schema_examples.py` sends every one."""

    name: str
    summary: str
    value: dict[str, Any]
    status: int
    code: str = ""


@dataclass(frozen=True)
class OperationDoc:
    tag: str
    summary: str
    description: str
    problems: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()


PROFILE = {"kind": "profile", "userId": DEMO_MEMBER}
ASKS_FOR_MEMBER = Example("demo-member", "The demo member", {"userId": DEMO_MEMBER}, 200)


WRITE_PROBLEMS = (
    "sensitive-category-without-consent",
    "scope-suppressed",
    "consumer-not-allowed",
    "secret-in-memory",
    "run-id-invalid",
    "run-write-limit",
    "run-loop-detected",
)
ENTRY_PROBLEMS = ("entry-tombstoned", "read-only-copy")

OPERATIONS: dict[str, OperationDoc] = {
    # -- memory ------------------------------------------------------------------------------
    "memories_list": OperationDoc(
        "memory",
        "List a member's memories",
        "The member's memories, newest first, a page at a time: pass `next` back as "
        "`cursor` for the next page. Filter by `scope` (a scope key), `category` and "
        "`lifecycle`; forgotten memories appear only with `lifecycle=tombstoned`.",
        examples=(
            Example(
                "demo-member",
                "The demo member's memories",
                {"userId": DEMO_MEMBER, "limit": 10},
                200,
            ),
        ),
    ),
    "memories_write": OperationDoc(
        "memory",
        "Write a memory",
        "Remember something about the member. `scope` names its kind and exactly the "
        "identifiers that kind needs (`scope.userId` is always the member; `session`, "
        "`scene`, `pose` and `crisis` also need `scope.sessionId`). A sensitive category "
        "needs the member's consent to it first (`POST /api/v1/consents`).\n\n"
        "Answers: **201** with the stored memory; **200** `written: false` with a `reason` "
        "when nothing new was stored (`already-known`, `unchanged`, `scope-ephemeral`, "
        "`forgotten-not-recreated`); **409** `memory-conflict` when it contradicts what "
        "the member said (ask them the `question`, then answer the conflict); **409** "
        "`off-the-record` when the member paused memory; **202** when held for approval.\n\n"
        + GOVERNED_FIELDS
        + "\n\n"
        + APPROVALS_RULE,
        (
            "memory-conflict",
            "off-the-record",
            "held-for-approval",
            "taint-cannot-pause",
            "cannot-pause",
            *WRITE_PROBLEMS,
        ),
        examples=(
            Example(
                "profile-preference",
                "A preference, in the member's profile",
                {
                    "userId": DEMO_MEMBER,
                    "scope": PROFILE,
                    "category": "preference",
                    "body": "Prefers green tea to coffee.",
                    "origin": "user-stated",
                },
                201,
            ),
            Example(
                "session-goal",
                "A goal, in one session (a session scope needs scope.sessionId)",
                {
                    "userId": DEMO_MEMBER,
                    "scope": {"kind": "session", "userId": DEMO_MEMBER, "sessionId": "s-1"},
                    "category": "goal",
                    "body": "Wants to run a half marathon in May.",
                    "origin": "user-stated",
                },
                201,
            ),
            Example(
                "sensitive-without-consent",
                "A sensitive category before the member consented to it",
                {
                    "userId": DEMO_MEMBER,
                    "scope": PROFILE,
                    "category": "medical",
                    "body": "Takes insulin before breakfast.",
                    "origin": "user-stated",
                },
                403,
                "sensitive-category-without-consent",
            ),
        ),
    ),
    "memories_get": OperationDoc(
        "memory",
        "Read a memory",
        "The memory's current revision. A forgotten memory is 404 here.",
        examples=(ASKS_FOR_MEMBER,),
    ),
    "memories_correct": OperationDoc(
        "memory",
        "Correct a memory",
        "Change a memory's body, subject, category or relationship note (send at least "
        "one): a new revision that supersedes the current one. 409 `memory-conflict` when "
        "the correction contradicts another memory the member stated.\n\n"
        + GOVERNED_FIELDS
        + "\n\n"
        + APPROVALS_RULE,
        (
            "memory-conflict",
            "held-for-approval",
            "taint-cannot-pause",
            "cannot-pause",
            "memory-changed",
            *ENTRY_PROBLEMS,
            *WRITE_PROBLEMS,
        ),
        examples=(
            Example(
                "new-body",
                "Correct the text",
                {"userId": DEMO_MEMBER, "body": "Prefers oolong tea to coffee."},
                200,
            ),
        ),
    ),
    "memories_history": OperationDoc(
        "memory",
        "A memory's history",
        "Every revision of the memory, oldest first.",
        examples=(ASKS_FOR_MEMBER,),
    ),
    "memories_forget": OperationDoc(
        "memory",
        "Forget a memory",
        "Forget the memory: it stops being recalled at once and its text is erased for "
        "good after 14 days. The answer carries no text.\n\n" + APPROVALS_RULE,
        (
            "held-for-approval",
            "taint-cannot-pause",
            "cannot-pause",
            "run-id-invalid",
            *ENTRY_PROBLEMS,
        ),
        examples=(Example("forget", "Forget it now", {"userId": DEMO_MEMBER}, 200),),
    ),
    "memories_pause": OperationDoc(
        "memory",
        "Pause a memory",
        "Stop recalling the memory until `endsAt` (or until it is resumed). Only the "
        "member or the surface that paused it can resume it.",
        ("not-active", *ENTRY_PROBLEMS),
        examples=(
            Example(
                "until",
                "Pause it until a date",
                {"userId": DEMO_MEMBER, "endsAt": "2030-01-01T00:00:00Z"},
                200,
            ),
        ),
    ),
    "memories_resume": OperationDoc(
        "memory",
        "Resume a paused memory",
        "Recall the memory again.",
        ("not-paused", "control-set-by-member", "control-set-by-another-caller", *ENTRY_PROBLEMS),
    ),
    "memories_confirm": OperationDoc(
        "memory",
        "Confirm an inferred memory",
        "The member confirms a memory the assistant inferred: it becomes active and "
        "`user-confirmed`.",
        ENTRY_PROBLEMS,
    ),
    "memories_change_scope": OperationDoc(
        "memory",
        "Move a memory to another scope",
        "Promote or demote the memory: session to profile or notebook, profile to "
        "notebook. Moving a tenant memory to a notebook makes a read-only copy for the "
        "member: 201 with the copy.",
        (
            "scope-change-not-allowed",
            "same-scope",
            "tenant-memory-never-consumer-profile",
            "scope-change-conflict",
            *ENTRY_PROBLEMS,
            *WRITE_PROBLEMS,
        ),
        examples=(
            Example(
                "to-notebook",
                "Move a profile memory into a notebook",
                {
                    "userId": DEMO_MEMBER,
                    "scope": {"kind": "notebook", "userId": DEMO_MEMBER, "notebookId": "n-1"},
                },
                200,
            ),
        ),
    ),
    "memories_conflict_answer": OperationDoc(
        "memory",
        "Answer a memory conflict",
        "Send the member's answer to the `question` of a 409 `memory-conflict`: `update` "
        "(the new memory replaces the old one) or `keep` (the old one stays).",
        ("conflict-closed", "conflict-expired", "conflict-stale", *WRITE_PROBLEMS),
        examples=(
            Example(
                "update",
                "The new memory replaces the old",
                {"userId": DEMO_MEMBER, "answer": "update"},
                200,
            ),
        ),
    ),
    "actors_forget": OperationDoc(
        "memory",
        "Forget every mention of a person",
        "Forget every memory that mentions a person (by `actorName` or `actorHandle`, "
        "exactly one). Destructive: it always waits for the member's approval first "
        "(202 `held-for-approval`), then runs by itself.\n\n" + APPROVALS_RULE,
        (
            "held-for-approval",
            "cannot-pause",
            "no-owner-to-ask",
            "side-effect-ledger-off",
            "approval-arguments-invalid",
        ),
        examples=(
            Example(
                "by-name",
                "Forget every mention of Sam (waits for the member)",
                {"userId": DEMO_MEMBER, "actorName": "Sam"},
                202,
                "held-for-approval",
            ),
        ),
    ),
    "off_the_record_status": OperationDoc(
        "off-the-record",
        "Is the member off the record?",
        "Whether writes are paused for this session (`sessionId`) or, without one, for "
        "every session of the surface.",
        examples=(
            Example("session", "One session", {"userId": DEMO_MEMBER, "sessionId": "s-1"}, 200),
        ),
    ),
    "off_the_record_on": OperationDoc(
        "off-the-record",
        "Go off the record",
        "Pause memory writes for a session (or all sessions of the surface): every write "
        "answers 409 `off-the-record` and stores nothing until it is switched off.",
        examples=(
            Example(
                "session",
                "Pause writes in one session",
                {"userId": DEMO_MEMBER, "sessionId": "s-1"},
                200,
            ),
        ),
    ),
    "off_the_record_off": OperationDoc(
        "off-the-record",
        "Go back on the record",
        "Resume memory writes. Only the member or the caller that switched it on may.",
        ("control-set-by-member", "control-set-by-another-caller"),
        examples=(
            Example(
                "session",
                "Resume writes in one session",
                {"userId": DEMO_MEMBER, "sessionId": "s-1"},
                200,
            ),
        ),
    ),
    "recall": OperationDoc(
        "recall",
        "Recall memories for a turn",
        "What the assistant may use this turn, ranked by relevance to `query`. Name the "
        "scope with `scope` (an object) or `scopeKey` (its colon-joined key), exactly one. "
        "`context` is what the turn is about (a `health` turn may surface health "
        "memories); `crisisFrame: true` recalls for a crisis turn (only what is safe to "
        "surface then); `consentedCategories` may narrow the member's consents, never "
        "widen them; `destinationTier` (`local` or `cloud`) may narrow the surface "
        "client's tier: a cloud answer never carries personal memories.\n\n"
        "`auditEnvelope` says what happened without content: `evaluatedCount` "
        "candidates, the `returnedIds`, and `suppressionCounts` of the ones dropped, by "
        "reason (not consented, paused, wrong context, tier ...).",
        (
            "surface-forbidden",
            "destination-tier-wider-than-client",
            "run-id-invalid",
            "run-recall-limit",
            "egress-unknown-tier",
            "egress-unfiltered",
        ),
        examples=(
            Example(
                "by-scope",
                "The profile, for a general turn",
                {
                    "userId": DEMO_MEMBER,
                    "scope": PROFILE,
                    "query": "what does she drink in the morning?",
                    "surface": "assistant",
                    "context": "general",
                    "limit": 5,
                },
                200,
            ),
            Example(
                "by-scope-key-to-cloud",
                "By scope key, for a model in the cloud",
                {
                    "userId": DEMO_MEMBER,
                    "scopeKey": f"profile:{DEMO_MEMBER}",
                    "query": "coffee",
                    "surface": "assistant",
                    "context": "general",
                    "destinationTier": "cloud",
                },
                200,
            ),
        ),
    ),
    # -- consent -----------------------------------------------------------------------------
    "v1_consents_retrieve": OperationDoc(
        "consent",
        "List a member's consent events",
        "The member's consent ledger, newest first: every grant, revocation, opt-out and "
        "opt-in. Pass `nextBefore` back as `before` for older events.",
        examples=(ASKS_FOR_MEMBER,),
    ),
    "v1_consents_create": OperationDoc(
        "consent",
        "Record consent",
        "Record what the member said: grant or revoke a consent (`data_processing`, "
        "`data_storage`, a sensitive category such as `category:medical`, ...), or opt "
        "out of / back into a use. Record it the moment the member agrees, with how it "
        "was captured; the ledger is append-only. Revoking a sensitive category forgets "
        "the memories in it.",
        (
            "consent-not-granted",
            "not-opted-out",
            "capture-method-not-allowed",
            "capture-role-not-allowed",
            "witness-must-be-recorder",
            "capture-future-dated",
            "capture-backdated",
        ),
        examples=(
            Example(
                "grant-sensitive-category",
                "The member switches on memory about their health",
                {
                    "userId": DEMO_MEMBER,
                    "type": "category:medical",
                    "status": "granted",
                    "legalBasis": "explicit_consent",
                    "captureMethod": "inline-prompt",
                    "termsVersion": "2025-09",
                },
                201,
            ),
        ),
    ),
    "v1_consents_active_retrieve": OperationDoc(
        "consent",
        "A member's current consents",
        "The consents in force now, derived from the ledger, and the scope policies they enable.",
        examples=(ASKS_FOR_MEMBER,),
    ),
    # -- continuity --------------------------------------------------------------------------
    "continuation_tokens_recent": OperationDoc(
        "continuity",
        "Recent continuation tokens",
        "Where the member left off on other devices, newest first: a surface picks up a "
        "session from here.",
        examples=(
            Example(
                "assistant", "The assistant's", {"userId": DEMO_MEMBER, "surface": "assistant"}, 200
            ),
        ),
    ),
    "continuation_tokens_write": OperationDoc(
        "continuity",
        "Save where the member is",
        "Write a checkpoint (a reference to where the session is, never its content) so "
        "another device can continue. 201 the first time for a device and scope, 200 "
        "after; `conflictNotice` says when another device wrote since. Sensitive "
        "categories travel only with the member's cross-device consent.",
        ("cross-device-sync-off",),
        examples=(
            Example(
                "turn",
                "The member is at turn 12 of an evening chat on their phone",
                {
                    "userId": DEMO_MEMBER,
                    "scopeKey": f"session:{DEMO_MEMBER}:evening-chat",
                    "surfaceContext": {"surface": "assistant", "sessionId": "evening-chat"},
                    "anchorRef": {"surface": "assistant", "kind": "turn", "ref": "turn-12"},
                    "posture": "speaking",
                    "deviceId": "phone-1",
                    "clientTimestamp": "2026-01-05T19:30:00Z",
                },
                201,
            ),
        ),
    ),
    "continuation_tokens_forget": OperationDoc(
        "continuity",
        "Forget every continuation token",
        "Delete the member's continuation tokens on every device and surface.",
        examples=(Example("all", "Every device", {"userId": DEMO_MEMBER}, 200),),
    ),
    # -- approvals and runs ------------------------------------------------------------------
    "approvals_list": OperationDoc(
        "approvals",
        "Pending approvals",
        "The calls waiting for the member's approval, oldest first.\n\n" + APPROVALS_RULE,
        examples=(ASKS_FOR_MEMBER,),
    ),
    "approvals_decide": OperationDoc(
        "approvals",
        "Approve or deny a held call",
        "The member's own answer (their browser session; a surface may not answer for "
        "them). An approved call runs again, governed again; `resume.code` says how it "
        "went.",
        ("forbidden", "approval-already-decided", "approval-expired"),
    ),
    "runs_steps_create": OperationDoc(
        "runs",
        "Report a tool step of a run",
        "Tell Iris what a run did before it writes: a step with `readExternalContent: "
        "true` (a web page, an email, a document) taints the run, and the run's later "
        "corrections, forgets and restores wait for the member's approval.",
        ("run-id-invalid", "forbidden"),
        examples=(
            Example(
                "read-a-page",
                "The run read a web page",
                {"tool": "web_fetch", "readExternalContent": True, "source": "a recipe page"},
                201,
            ),
        ),
    ),
    # -- data rights -------------------------------------------------------------------------
    "data_rights_list": OperationDoc(
        "data-rights",
        "A member's data-rights requests",
        "Newest first.",
        examples=(ASKS_FOR_MEMBER,),
    ),
    "data_rights_file": OperationDoc(
        "data-rights",
        "File a data-rights request",
        "Ask for an export, access or deletion on the member's behalf. One open request "
        "of a kind at a time.",
        ("open-request-exists",),
        examples=(
            Example(
                "export", "A copy of everything", {"userId": DEMO_MEMBER, "kind": "export"}, 201
            ),
        ),
    ),
    "data_rights_get": OperationDoc("data-rights", "A data-rights request", "Its state."),
    "data_rights_transition": OperationDoc(
        "data-rights",
        "Move a data-rights request on",
        "Verify, cancel, or (the legal role) work the request.",
        (
            "transition-not-permitted",
            "work-not-finished",
            "legal-hold",
            "verification-failed",
            "request-not-open",
        ),
    ),
    "data_rights_send_code": OperationDoc(
        "data-rights",
        "Send a verification code",
        "Send the member a one-time code to confirm a request a surface filed.",
        ("not-awaiting-verification", "no-contact-address"),
    ),
    "data_rights_undo": OperationDoc(
        "data-rights",
        "Undo a deletion",
        "Bring back what a soft deletion removed, inside its grace window.",
        ("deletion-not-started", "not-a-soft-delete", "undo-window-closed"),
    ),
    "data_rights_extend": OperationDoc(
        "data-rights",
        "Extend a request's deadline",
        "The legal role extends the deadline once, with the reason the member is sent.",
        ("forbidden", "transition-not-permitted", "request-not-open", "legal-role-required"),
    ),
    "v1_data_rights_bundle_retrieve": OperationDoc(
        "data-rights",
        "Download an export bundle",
        "The signed export (a zip). 409 while it is built, 410 once its window ended.",
        ("bundle-not-ready", "bundle-expired"),
    ),
    "v1_data_rights_signing_key_retrieve": OperationDoc(
        "data-rights",
        "Export signing keys",
        "The public keys that verify export bundles' signatures.",
    ),
    # -- inspections (operators) -------------------------------------------------------------
    "inspections_list": OperationDoc(
        "inspections",
        "Inspections (operators)",
        "Operators only (anyone else gets 404): inspections of the tenant.",
        ("not-found",),
    ),
    "inspections_request": OperationDoc(
        "inspections",
        "Request an inspection (operators)",
        "Operators only (anyone else gets 404): ask for justified, time-boxed access to a "
        "member's memory.",
        ("forbidden", "conflict", "not-found"),
    ),
    "inspections_get": OperationDoc(
        "inspections", "An inspection (operators)", "Operators only: its state and grant."
    ),
    "inspections_transition": OperationDoc(
        "inspections",
        "Move an inspection on (operators)",
        "Operators only: approve, deny, start, close; four eyes.",
        ("forbidden", "conflict"),
    ),
    "inspections_snapshot": OperationDoc(
        "inspections",
        "An inspection's snapshot (operators)",
        "Operators only, while the grant lasts: what the inspector may see.",
        ("forbidden", "conflict"),
    ),
    "inspections_replay": OperationDoc(
        "inspections",
        "Replay an inspection (operators)",
        "Operators only: what the inspector saw, as it was.",
        ("forbidden", "conflict"),
    ),
    # -- events ------------------------------------------------------------------------------
    "events_list": OperationDoc(
        "events",
        "Catch up on events after a cursor",
        "The tenant's events with a cursor above `after`, oldest first: the same bodies "
        "the webhooks post (ids, codes and timestamps; never a memory's text). Keep the "
        "last `cursor` you handled and ask again with `after` set to it; `hasMore` says "
        "whether to ask at once. For a surface client's token only; webhooks are declared "
        "by an administrator (`manage.py create_webhook`, docs/decisions/events.md).",
        ("events-surface-only",),
    ),
    # -- health ------------------------------------------------------------------------------
    "v1_health_retrieve": OperationDoc(
        "health",
        "Health",
        "For a load balancer: 200 `ok` when the database (and Redis, when configured) "
        "answer; 200 `degraded` when only Redis does not (reads and writes still work, "
        "jobs run in the request); 503 with the same body when the database does not. "
        "`recall` says which ranker recall uses. No token needed.",
    ),
}
