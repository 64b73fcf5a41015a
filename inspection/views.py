"""The inspection pages: the operator console (request, review, view, close, the open
list, the audit check) and the member's "Who looked at my memory".

Server-rendered and usable without JavaScript: every action is a plain form POST with a
CSRF token that redirects (post/redirect/get), or re-renders its form with the errors,
field by field, and status 400. Every change goes through `inspection.services` with the
caller's own principal; a refusal is shown in plain words (`inspection.wording`).

The console is for operators who hold `request_inspection` on their own tenant (django-
guardian); the audit check for those who hold `verify_audit`; anyone else gets a plain 403
page. Another tenant's inspection is 404, exactly like one that does not exist. The member
page is for members only (an operator gets 404: their own log is not a member's).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms as django_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from governance.audit import verify_chain
from governance.errors import IrisError, NotFound
from governance.models import AuditSeal, User
from governance.principal import Principal, principal_of
from governance.roles import Role
from inspection import policy, selectors, services, wording
from inspection.enums import PATHS, InspectionState
from inspection.forms import (
    CLOSE_FIELDS,
    DENY_FIELDS,
    GRANT_FIELDS,
    ISSUE_FIELDS,
    REQUEST_FIELDS,
    CloseForm,
    DenyForm,
    GrantForm,
    IssueReferenceForm,
    RequestForm,
    add_service_error,
)
from inspection.models import Inspection

S = InspectionState
PATH_VALUES = frozenset(p.value for p in PATHS)
RECENT = 20
AUDIT_SESSION_KEY = "inspection-audit-result"
# The incident reference just issued, shown once on the next page and then forgotten.
ISSUED_SESSION_KEY = "inspection-issued-reference"

PROBLEM_TITLES = {
    403: "You cannot open this page",
    404: "Not found",
    409: "Not possible now",
}


def _problem(request: HttpRequest, status: int, message: str) -> HttpResponse:
    context = {
        "title": PROBLEM_TITLES.get(status, "Something went wrong"),
        "message": message,
        "back_url": reverse("inspection:home")
        if getattr(request.user, "is_operator", False)
        else reverse("home"),
    }
    return render(request, "inspection/problem.html", context, status=status)


def _see_other(url: str) -> HttpResponse:
    response = redirect(url)
    response.status_code = 303
    return response


# =========================================================================== who may enter


class _Refused(Exception):
    pass


def _operator_with(request: HttpRequest, permission: str) -> tuple[User, Principal]:
    user = request.user
    if not isinstance(user, User) or not user.is_operator or user.tenant_id is None:
        raise _Refused
    if not user.has_perm(f"governance.{permission}", user.tenant):
        raise _Refused
    return user, principal_of(user)


def _gated(permission: str, refusal: str) -> Callable[..., Callable[..., HttpResponse]]:
    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @login_required
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                user, principal = _operator_with(request, permission)
            except _Refused:
                return _problem(request, 403, refusal)
            return view(request, user, principal, *args, **kwargs)

        wrapped.__name__ = view.__name__
        wrapped.__doc__ = view.__doc__
        return wrapped

    return decorate


console_only = _gated(
    "request_inspection", "Inspections are for the operators of your organisation."
)
auditors_only = _gated(
    "verify_audit",
    "The audit check is for administrators, the legal team and trust and safety.",
)


def _inspection_or_404(principal: Principal, inspection_id: uuid.UUID) -> Inspection:
    try:
        return selectors.inspection_get(principal, inspection_id)
    except NotFound:
        raise Http404("No such inspection.") from None


# =========================================================================== the console


@dataclass(frozen=True)
class Row:
    """One inspection as the console lists it."""

    row: Inspection
    path_label: str
    state_label: str
    sensitivity_label: str
    requester_roles: str
    yours: bool


def _row(row: Inspection, user: User) -> Row:
    return Row(
        row=row,
        path_label=wording.PATH_LABELS.get(row.path, "Not chosen"),
        state_label=wording.STATE_LABELS[row.state],
        sensitivity_label=wording.SENSITIVITY_LABELS[row.sensitivity],
        requester_roles=wording.roles(row.requester_roles),
        yours=row.requester_id == user.pk,
    )


def _home_page(
    request: HttpRequest,
    user: User,
    principal: Principal,
    *,
    form: RequestForm | None = None,
    issue_form: IssueReferenceForm | None = None,
    status: int = 200,
) -> HttpResponse:
    open_rows = [_row(r, user) for r in selectors.inspections_for(principal, open_only=True)]
    finished = [
        _row(r, user)
        for r in selectors.inspections_for(principal).exclude(
            state__in=[s.value for s in (*PATHS, S.REQUESTED, S.GRANTED)]
        )[:RECENT]
    ]
    context = {
        "reviews": bool(principal.roles & policy.REVIEWER_ROLES),
        "to_review": [r for r in open_rows if r.row.state in PATH_VALUES and not r.yours]
        if principal.roles & policy.REVIEWER_ROLES
        else [],
        "open_rows": open_rows,
        "finished": finished,
        "form": form or RequestForm(),
        # A form that came back with errors stays on the page, so its errors are read.
        "can_issue": Role.TRUST_AND_SAFETY.value in principal.roles or issue_form is not None,
        "issue_form": issue_form or IssueReferenceForm(prefix="issue"),
        "issued": _issued_once(request) if status == 200 else None,
    }
    return render(request, "inspection/home.html", context, status=status)


def _issued_once(request: HttpRequest) -> dict[str, Any] | None:
    issued: dict[str, Any] | None = request.session.pop(ISSUED_SESSION_KEY, None)
    if issued:
        issued["expires"] = datetime.fromisoformat(issued["expires"])
    return issued


@console_only
@require_GET
def home(request: HttpRequest, user: User, principal: Principal) -> HttpResponse:
    return _home_page(request, user, principal)


def _member_named(user: User, text: str) -> User | None:
    """A member of the operator's own tenant, by public id or by username."""
    members = User.objects.filter(tenant_id=user.tenant_id, kind=User.Kind.MEMBER, is_active=True)
    try:
        return members.filter(public_id=uuid.UUID(text)).first()
    except ValueError:
        return members.filter(username=text).first()


@console_only
@require_POST
def request_access(request: HttpRequest, user: User, principal: Principal) -> HttpResponse:
    form = RequestForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        member = _member_named(user, data["member"].strip())
        if member is None:
            form.add_error("member", "No member of your organisation has this username or id.")
        else:
            try:
                row = services.inspection_request(
                    principal=principal,
                    member=member,
                    path=data["path"],
                    sensitivity=data["sensitivity"],
                    justification=data["justification"],
                    incident_reference=data["incident_reference"] or None,
                    consent_snapshot_id=data["consent_snapshot_id"].strip() or None,
                )
            except IrisError as exc:
                add_service_error(form, exc, REQUEST_FIELDS)
            else:
                messages.success(request, "Requested. Another operator reviews it next.")
                return _see_other(reverse("inspection:detail", kwargs={"inspection_id": row.id}))
    return _home_page(request, user, principal, form=form, status=400)


@console_only
@require_POST
def issue_reference(request: HttpRequest, user: User, principal: Principal) -> HttpResponse:
    """Trust and safety issues a signed incident reference for one member. The text is
    shown once (kept in the session until the next page reads it), never stored."""
    form = IssueReferenceForm(request.POST, prefix="issue")
    if form.is_valid():
        member = _member_named(user, form.cleaned_data["member"].strip())
        if member is None:
            form.add_error("member", "No member of your organisation has this username or id.")
        else:
            try:
                issued = services.incident_reference_issue(
                    principal=principal, member=member, hours=form.cleaned_data["hours"]
                )
            except IrisError as exc:
                add_service_error(form, exc, ISSUE_FIELDS)
            else:
                request.session[ISSUED_SESSION_KEY] = {
                    "text": issued.reference,
                    "member": member.username,
                    "expires": issued.row.expires_at.isoformat(),
                }
                messages.success(request, "Incident reference issued. Copy it now.")
                return _see_other(reverse("inspection:home") + "#issued")
    return _home_page(request, user, principal, issue_form=form, status=400)


@dataclass(frozen=True)
class Step:
    position: int
    occurred_at: datetime
    label: str
    who: str
    why: str


def _detail_page(
    request: HttpRequest,
    user: User,
    principal: Principal,
    inspection_id: uuid.UUID,
    *,
    bound: Mapping[str, django_forms.Form] | None = None,
    status: int = 200,
) -> HttpResponse:
    row = _inspection_or_404(principal, inspection_id)
    bound = bound or {}
    now = timezone.now()
    is_requester = row.requester_id == user.pk
    is_reviewer = row.reviewer_id == user.pk
    roles = principal.roles
    waiting = row.state in PATH_VALUES
    granted = row.state == S.GRANTED
    can_review = waiting and not is_requester and bool(roles & policy.REVIEWER_ROLES)
    steps = [
        Step(
            position=t.position,
            occurred_at=t.occurred_at,
            label=wording.STEP_LABELS[t.to_state],
            who=wording.roles(t.actor_roles)
            if t.actor_kind == "operator"
            else wording.ACTOR_LABELS.get(t.actor_kind, "Iris"),
            why=wording.reason(t.reason_code),
        )
        for t in row.trail.order_by("position")
    ]
    forms: dict[str, django_forms.Form] = {
        "grant": GrantForm(prefix="grant"),
        "deny": DenyForm(prefix="deny"),
        "close": CloseForm(prefix="close"),
        **bound,
    }
    context = {
        "row": row,
        "item": _row(row, user),
        "steps": steps,
        "is_requester": is_requester,
        "waiting": waiting,
        "notice_text": _notice_text(row),
        "reviewer_roles": wording.roles(row.reviewer_roles) if row.reviewer_id else "",
        "member_categories": wording.topics(row.categories),
        # A form that came back with errors stays on the page, so its errors are read.
        "can_grant": can_review or "grant" in bound,
        "can_deny": can_review or "deny" in bound,
        "can_withdraw": waiting and is_requester,
        "can_view": granted
        and is_requester
        and row.expires_at is not None
        and now < row.expires_at,
        "can_close": (granted and (is_requester or is_reviewer or Role.ADMIN.value in roles))
        or "close" in bound,
        "can_carve_out": row.path == S.INCIDENT_ESCALATION and Role.TRUST_AND_SAFETY.value in roles,
        "can_replay": row.granted_at is not None
        and not is_requester
        and bool(roles & services.AUDITOR_ROLES),
        "forms": forms,
    }
    if not (
        context["can_grant"]
        or context["can_deny"]
        or context["can_withdraw"]
        or context["can_view"]
        or context["can_close"]
    ):
        context["idle_text"] = _idle_text(row, waiting=waiting, granted=granted)
    return render(request, "inspection/detail.html", context, status=status)


def _notice_text(row: Inspection) -> str:
    """Whether the member is told of this access, for the operators of the tenant."""
    if row.state != S.CLOSED or row.granted_at is None:
        return ""
    if row.carve_out:
        return "Withheld: closed under an investigation carve-out (recorded in the audit chain)."
    notice = getattr(row, "notice", None)
    if notice is None:
        return "Not needed: no sensitive memory was in the snapshot."
    if notice.delivered_at is not None:
        return f"Told on {notice.delivered_at:%-d %B %Y, %H:%M} UTC."
    return f"To be told by {notice.due_at:%-d %B %Y, %H:%M} UTC."


def _idle_text(row: Inspection, *, waiting: bool, granted: bool) -> str:
    if waiting:
        return (
            "Another operator with a reviewing role (administrator, legal or trust and "
            "safety) decides."
        )
    if granted:
        return (
            "Only the requester reads the snapshot; the people on the grant or an "
            "administrator close it."
        )
    return "Nothing: this inspection is finished."


@console_only
@require_GET
def detail(
    request: HttpRequest, user: User, principal: Principal, inspection_id: uuid.UUID
) -> HttpResponse:
    return _detail_page(request, user, principal, inspection_id)


def _back_to(inspection_id: uuid.UUID) -> HttpResponse:
    return _see_other(reverse("inspection:detail", kwargs={"inspection_id": inspection_id}))


def _move(
    request: HttpRequest,
    user: User,
    principal: Principal,
    inspection_id: uuid.UUID,
    *,
    name: str,
    form: django_forms.Form,
    to: InspectionState,
    arguments: Callable[[dict[str, Any]], dict[str, Any]],
    success: str,
    fields: dict[str, str],
) -> HttpResponse:
    """Validate `form`, move the inspection; a refusal goes back onto the form, in words,
    and nothing changes."""
    _inspection_or_404(principal, inspection_id)
    if form.is_valid():
        try:
            services.inspection_transition(
                principal=principal,
                inspection_id=inspection_id,
                to=to.value,
                **arguments(form.cleaned_data),
            )
        except NotFound:
            raise Http404("No such inspection.") from None
        except IrisError as exc:
            add_service_error(form, exc, fields)
        else:
            messages.success(request, success)
            return _back_to(inspection_id)
    return _detail_page(request, user, principal, inspection_id, bound={name: form}, status=400)


@console_only
@require_POST
def grant(
    request: HttpRequest, user: User, principal: Principal, inspection_id: uuid.UUID
) -> HttpResponse:
    return _move(
        request,
        user,
        principal,
        inspection_id,
        name="grant",
        form=GrantForm(request.POST, prefix="grant"),
        to=S.GRANTED,
        arguments=lambda data: {
            "incident_reference": data["incident_reference"] or None,
            "consent_snapshot_id": data["consent_snapshot_id"].strip() or None,
        },
        success="Granted. The requester can now view the snapshot until the grant runs out.",
        fields=GRANT_FIELDS,
    )


@console_only
@require_POST
def deny(
    request: HttpRequest, user: User, principal: Principal, inspection_id: uuid.UUID
) -> HttpResponse:
    return _move(
        request,
        user,
        principal,
        inspection_id,
        name="deny",
        form=DenyForm(request.POST, prefix="deny"),
        to=S.DENIED,
        arguments=lambda data: {"reason_code": data["reason"]},
        success="Denied. Nothing of the member's memory was shown.",
        fields=DENY_FIELDS,
    )


@console_only
@require_POST
def withdraw(
    request: HttpRequest, user: User, principal: Principal, inspection_id: uuid.UUID
) -> HttpResponse:
    return _move(
        request,
        user,
        principal,
        inspection_id,
        name="deny",
        form=django_forms.Form(request.POST),
        to=S.DENIED,
        arguments=lambda data: {"reason_code": "withdrawn"},
        success="Withdrawn. Nothing of the member's memory was shown.",
        fields={},
    )


@console_only
@require_POST
def close(
    request: HttpRequest, user: User, principal: Principal, inspection_id: uuid.UUID
) -> HttpResponse:
    return _move(
        request,
        user,
        principal,
        inspection_id,
        name="close",
        form=CloseForm(request.POST, prefix="close"),
        to=S.CLOSED,
        arguments=lambda data: {"carve_out": data["carve_out"]},
        success="Closed. The snapshot can no longer be read.",
        fields=CLOSE_FIELDS,
    )


@dataclass(frozen=True)
class Shown:
    """One snapshot item, in words."""

    item: dict[str, Any]
    topic: str
    kind: str


def _shown(items: list[dict[str, Any]]) -> list[Shown]:
    return [
        Shown(
            item=i,
            topic=wording.TOPIC_LABELS.get(i["category"], "Other"),
            kind=wording.MEMORY_KIND_LABELS.get((i.get("scope") or {}).get("kind", ""), ""),
        )
        for i in items
    ]


def _snapshot_page(
    request: HttpRequest,
    user: User,
    principal: Principal,
    inspection_id: uuid.UUID,
    *,
    replay: bool,
) -> HttpResponse:
    row = _inspection_or_404(principal, inspection_id)
    read = services.inspection_replay if replay else services.inspection_read_snapshot
    try:
        view = read(principal=principal, inspection_id=row.id)
    except NotFound:
        raise Http404("No such inspection.") from None
    except IrisError as exc:
        return _problem(request, exc.status, wording.refusal(exc.code, exc.rule, exc.detail))
    context = {
        "row": row,
        "item": _row(row, user),
        "view": view,
        "shown": _shown(view.items),
        "replay": replay,
        "close_form": CloseForm(prefix="close"),
        "can_carve_out": row.path == S.INCIDENT_ESCALATION
        and Role.TRUST_AND_SAFETY.value in principal.roles,
    }
    return render(request, "inspection/snapshot.html", context)


@console_only
@require_GET
def snapshot(
    request: HttpRequest, user: User, principal: Principal, inspection_id: uuid.UUID
) -> HttpResponse:
    """The requester's view of the granted snapshot, while the grant lasts."""
    return _snapshot_page(request, user, principal, inspection_id, replay=False)


@console_only
@require_GET
def replay(
    request: HttpRequest, user: User, principal: Principal, inspection_id: uuid.UUID
) -> HttpResponse:
    """An auditor's replay of a snapshot exactly as it was granted, at any time after."""
    return _snapshot_page(request, user, principal, inspection_id, replay=True)


# =========================================================================== the audit check


def _own_chain_events(tenant_id: uuid.UUID) -> int:
    return AuditSeal.objects.filter(chain=str(tenant_id)).count()


@auditors_only
@require_http_methods(["GET", "POST"])
def audit(request: HttpRequest, user: User, principal: Principal) -> HttpResponse:
    """The check `manage.py verify_audit` runs, for the operator's own chain. POST runs it
    and redirects; GET shows the last result of this session."""
    assert user.tenant_id is not None
    if request.method == "POST":
        report = verify_chain()
        chain = str(user.tenant_id)
        brk = report.first_break
        # Another tenant's break is not this operator's to read: only that the walk stopped.
        result: dict[str, Any] = {
            "ok": report.ok,
            "at": timezone.now().isoformat(),
            "events": _own_chain_events(user.tenant_id),
            "own_break": brk is not None and brk.chain == chain,
            "position": brk.position if brk is not None and brk.chain == chain else None,
            "reason": brk.reason if brk is not None and brk.chain == chain else "",
        }
        request.session[AUDIT_SESSION_KEY] = result
        return _see_other(reverse("inspection:audit"))
    last: dict[str, Any] | None = request.session.get(AUDIT_SESSION_KEY)
    checked_at = datetime.fromisoformat(last["at"]) if last else None
    return render(request, "inspection/audit.html", {"result": last, "checked_at": checked_at})


# =========================================================================== the member


@dataclass(frozen=True)
class Access:
    line: selectors.AccessLogLine
    who: str
    why: str
    reason: str
    topics: str
    notice: str


@login_required
@require_GET
def mine(request: HttpRequest) -> HttpResponse:
    user = request.user
    if not isinstance(user, User) or user.kind != User.Kind.MEMBER:
        raise Http404("No access log here.")
    lines = selectors.member_access_log(member=user)
    accesses = [
        Access(
            line=line,
            who=wording.roles(line.role.split(", ")),
            why=wording.MEMBER_PATH_LABELS.get(line.path, "Another reason"),
            reason="" if line.reason_code == line.path else wording.reason(line.reason_code),
            topics=wording.topics(line.categories),
            notice=wording.NOTICE_LABELS.get(line.notice_status, ""),
        )
        for line in lines
    ]
    notices = [a for a in accesses if a.line.notice_status == "delivered"]
    return render(request, "inspection/mine.html", {"accesses": accesses, "notices": notices})
