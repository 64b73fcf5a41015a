"""Who may reach which route: the explicit table the route matrix checks
(tests/security/test_route_matrix.py).

Member A owns every object named in a URL (memory, conflict, data-rights request,
approval) and is the member of the inspection; the operators are of A's tenant; the last
two callers are of the other tenant. Each route has one row: what each caller gets.

  ok       the route serves the caller (a page, an answer, a redirect after a POST, or a
           400/409 naming what its empty body lacks or why the move is not possible now)
  login    sent to a sign-in page (anonymous; everyone, for the superusers-only admin)
  refused  401 or 403: a caller of the wrong kind or role (role gates say so openly)
  hidden   404: another member's or tenant's object, or a page that is not for the
           caller's kind, whose existence is not confirmed
"""

from __future__ import annotations

import os

ANON = "anonymous"
MEMBER_A = "member-a"
MEMBER_B = "member-b"
OPERATOR_ROLES = ("support", "admin", "legal", "trust-and-safety")
FOREIGN_MEMBER = "other-tenant-member"
FOREIGN_OPERATOR = "other-tenant-legal"
CALLERS = (ANON, MEMBER_A, MEMBER_B, *OPERATOR_ROLES, FOREIGN_MEMBER, FOREIGN_OPERATOR)

OK, LOGIN, REFUSED, HIDDEN = "ok", "login", "refused", "hidden"


def row(*outcomes: str) -> dict[str, str]:
    """One outcome per caller, in CALLERS order:
    anonymous, A, B, support, admin, legal, trust & safety, other member, other legal."""
    assert len(outcomes) == len(CALLERS)
    return dict(zip(CALLERS, outcomes, strict=True))


# -- the rows ------------------------------------------------------------------------------
#                  anon     A       B       sup      adm      legal    t&s      o-mem   o-legal
EVERYONE = row(OK, OK, OK, OK, OK, OK, OK, OK, OK)
SIGNED_IN = row(LOGIN, OK, OK, OK, OK, OK, OK, OK, OK)
SIGN_IN_STEP = row(LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN)
SUPERUSERS = SIGN_IN_STEP  # the admin site: none of the callers is a superuser

# Members' own pages: each member their own, operators are not members (404).
MEMBER_PAGE = row(LOGIN, OK, OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN, OK, HIDDEN)
# A member's object: its owner only.
OWNED_PAGE = row(LOGIN, OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN)
# Not reachable by anyone here (a report exists only once a request is completed).
NO_ONE_PAGE = row(LOGIN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN)
# Approvals are the member's; operators are refused by role.
APPROVALS_PAGE = row(LOGIN, OK, OK, REFUSED, REFUSED, REFUSED, REFUSED, OK, REFUSED)
APPROVAL_DECIDE_PAGE = row(LOGIN, OK, HIDDEN, REFUSED, REFUSED, REFUSED, REFUSED, HIDDEN, REFUSED)
# The data-rights queue: legal of the tenant; other roles refused; members refused.
QUEUE_PAGE = row(LOGIN, REFUSED, REFUSED, REFUSED, REFUSED, OK, REFUSED, REFUSED, OK)
QUEUE_ITEM = row(LOGIN, REFUSED, REFUSED, REFUSED, REFUSED, OK, REFUSED, REFUSED, HIDDEN)
# The inspection console: every operator role; members refused; A's inspection is hidden
# from the other tenant.
CONSOLE_PAGE = row(LOGIN, REFUSED, REFUSED, OK, OK, OK, OK, REFUSED, OK)
CONSOLE_ITEM = row(LOGIN, REFUSED, REFUSED, OK, OK, OK, OK, REFUSED, HIDDEN)
# Verifying the audit chain: every role but support.
AUDIT_PAGE = row(LOGIN, REFUSED, REFUSED, REFUSED, OK, OK, OK, REFUSED, OK)
# A snapshot or replay waits for a grant: refused to every operator until then.
UNGRANTED_READ = row(LOGIN, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED, HIDDEN)
# Member-owned notices of inspections: members only.
MINE_PAGE = MEMBER_PAGE

# The API (JSON): anonymous is 401; operators reach member routes only through inspection.
API_PUBLIC = EVERYONE
MEMBER_API = row(REFUSED, OK, OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN, OK, HIDDEN)
OWNED_API = row(REFUSED, OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN)
APPROVALS_API = row(REFUSED, OK, OK, REFUSED, REFUSED, REFUSED, REFUSED, OK, REFUSED)
APPROVAL_DECIDE_API = row(REFUSED, OK, HIDDEN, REFUSED, REFUSED, REFUSED, REFUSED, HIDDEN, REFUSED)
# A data-rights request: its member, and legal of its tenant.
REQUEST_API = row(REFUSED, OK, HIDDEN, HIDDEN, HIDDEN, OK, HIDDEN, HIDDEN, HIDDEN)
# Extending the deadline is legal's alone.
EXTEND_API = row(REFUSED, HIDDEN, HIDDEN, HIDDEN, HIDDEN, OK, HIDDEN, HIDDEN, HIDDEN)
INSPECTIONS_API = row(REFUSED, HIDDEN, HIDDEN, OK, OK, OK, OK, HIDDEN, OK)
INSPECTION_API = row(REFUSED, HIDDEN, HIDDEN, OK, OK, OK, OK, HIDDEN, HIDDEN)
UNGRANTED_READ_API = row(REFUSED, HIDDEN, HIDDEN, *[REFUSED] * 4, HIDDEN, HIDDEN)
# Run steps are reported by the surface that owns the run: no session may.
SURFACE_ONLY_API = row(*[REFUSED] * len(CALLERS))
# A body refused before anything is looked up (member B's 400 reveals nothing of A's row,
# since every id gets it): members' routes whose body names the scope or fields to use.
MEMBER_API_BODY_FIRST = MEMBER_API

TABLE: dict[str, dict[str, str]] = {
    # site
    "home": SIGNED_IN,
    "login": EVERYONE,
    "login-code": SIGN_IN_STEP,  # without a password step first, back to the login page
    "logout": SIGN_IN_STEP,  # signs out, then shows the login page
    "totp-setup": CONSOLE_PAGE,
    "api-schema": API_PUBLIC,
    "api-docs": API_PUBLIC,
    "admin:login": EVERYONE,
    "admin:logout": EVERYONE,
    # member pages
    "memory:home": MEMBER_PAGE,
    "memory:off_the_record": MEMBER_PAGE,
    "memory:detail": OWNED_PAGE,
    "memory:edit": OWNED_PAGE,
    "memory:forget": OWNED_PAGE,
    "memory:pause": OWNED_PAGE,
    "memory:resume": OWNED_PAGE,
    "memory:scope": OWNED_PAGE,
    "memory:answer_conflict": OWNED_PAGE,
    "memory:confirm": OWNED_PAGE,
    "memory:reject": OWNED_PAGE,
    "memory:restore": OWNED_PAGE,
    "memory:forget_topic": MEMBER_PAGE,
    "memory:forget_everything": MEMBER_PAGE,
    "memory:forgotten": MEMBER_PAGE,
    "consent:home": MEMBER_PAGE,
    "consent:grant": MEMBER_PAGE,
    "consent:revoke": MEMBER_PAGE,
    "consent:opt_in": MEMBER_PAGE,
    "consent:opt_out": MEMBER_PAGE,
    "approvals": APPROVALS_PAGE,
    "approvals-decide": APPROVAL_DECIDE_PAGE,
    "dsar:home": MEMBER_PAGE,
    "dsar:file_export": MEMBER_PAGE,
    "dsar:file_delete": MEMBER_PAGE,
    "dsar:file_access": MEMBER_PAGE,
    "dsar:cancel": OWNED_PAGE,
    "dsar:appeal": OWNED_PAGE,
    "dsar:undo": OWNED_PAGE,
    "dsar:send_code": OWNED_PAGE,
    "dsar:verify": OWNED_PAGE,
    "dsar:download": OWNED_PAGE,
    "dsar:report": NO_ONE_PAGE,
    "inspection:mine": MINE_PAGE,
    # operator console
    "dsar:queue": QUEUE_PAGE,
    "dsar:queue_item": QUEUE_ITEM,
    "dsar:queue_verify": QUEUE_ITEM,
    "dsar:queue_start": QUEUE_ITEM,
    "dsar:queue_extend": QUEUE_ITEM,
    "dsar:queue_complete": QUEUE_ITEM,
    "dsar:queue_fail": QUEUE_ITEM,
    "dsar:hold_place": QUEUE_ITEM,
    "dsar:hold_lift": QUEUE_ITEM,
    "inspection:home": CONSOLE_PAGE,
    "inspection:request": CONSOLE_PAGE,
    "inspection:issue_reference": CONSOLE_PAGE,
    "inspection:audit": AUDIT_PAGE,
    "inspection:detail": CONSOLE_ITEM,
    "inspection:grant": CONSOLE_ITEM,
    "inspection:deny": CONSOLE_ITEM,
    "inspection:withdraw": CONSOLE_ITEM,
    "inspection:close": CONSOLE_ITEM,
    "inspection:snapshot": UNGRANTED_READ,
    "inspection:replay": UNGRANTED_READ,
    # API
    "api-health": API_PUBLIC,
    "api-data-rights-signing-key": API_PUBLIC,
    "api-memories": MEMBER_API,
    "api-recall": MEMBER_API,
    "api-actors-forget": MEMBER_API,
    "api-off-the-record": MEMBER_API,
    "api-consents": MEMBER_API,
    "api-consents-active": MEMBER_API,
    "api-continuation-tokens": MEMBER_API,
    "api-data-rights": MEMBER_API,
    "api-memory": OWNED_API,
    "api-memory-history": OWNED_API,
    "api-memory-confirm": OWNED_API,
    "api-memory-forget": OWNED_API,
    "api-memory-pause": OWNED_API,
    "api-memory-resume": OWNED_API,
    "api-memory-conflict-answer": OWNED_API,
    "api-memory-scope": MEMBER_API_BODY_FIRST,
    "api-approvals": APPROVALS_API,
    "api-approvals-decide": APPROVAL_DECIDE_API,
    "api-data-rights-detail": REQUEST_API,
    "api-data-rights-bundle": OWNED_API,
    "api-data-rights-code": OWNED_API,
    "api-data-rights-undo": OWNED_API,
    "api-data-rights-extend": EXTEND_API,
    # Which moves each may make is the lifecycle's table (tests/dsar); here, who reaches it.
    "api-data-rights-transition": REQUEST_API,
    "api-inspections": INSPECTIONS_API,
    "api-inspection-detail": INSPECTION_API,
    "api-inspection-transition": INSPECTION_API,
    "api-inspection-snapshot": UNGRANTED_READ_API,
    "api-inspection-replay": UNGRANTED_READ_API,
    "api-run-steps": SURFACE_ONLY_API,
    # Events are replayed with a surface client's token only.
    "api-events": SURFACE_ONLY_API,
}


def expected_outcome(route: str, caller: str) -> str | None:
    """The table's cell; the admin site's model pages share one row. None: no row yet."""
    if os.environ.get("IRIS_MATRIX_PROBE"):
        return "?"
    if route in TABLE:
        return TABLE[route][caller]
    if route.startswith("admin:"):
        return SUPERUSERS[caller]
    return None
