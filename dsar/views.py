"""The data-rights pages: the member's "Your data requests" and the legal team's queue.

Server-rendered and usable without JavaScript: every action is a plain form POST with a
CSRF token that redirects back (post/redirect/get), or re-renders its form with the
errors, field by field, and status 400. Every change goes through `dsar.services` with the
caller's own principal; a refusal is shown in plain words (`dsar.wording`).

Members only on the member page (an operator gets 404: an operator never files for a
member here). The queue is for operators who hold the `work_data_rights` permission on
their tenant and the legal role (everyone else 403); a request of another tenant is 404.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django import forms as django_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch, prefetch_related_objects
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dsar import access, deadlines, deletion, export, selectors, services, wording
from dsar.enums import CODE_METHODS, OPEN_STATES, RequestKind, RequestState, VerificationMethod
from dsar.forms import (
    DELETE_FIELDS,
    EXPORT_FIELDS,
    CodeForm,
    DeleteRequestForm,
    ExportRequestForm,
    ExtendForm,
    FailForm,
    HoldForm,
    OperatorVerifyForm,
    RequestForm,
    add_service_error,
)
from dsar.models import DataRightsEvent, DataRightsRequest, LegalHold, VerificationCode
from governance.errors import IrisError, NotFound
from governance.models import User
from governance.pipeline import Denied, HeldForApproval
from governance.principal import Principal, principal_of
from governance.refusals import refusal_message

S = RequestState
OPEN = frozenset(s.value for s in OPEN_STATES)
WAITING = frozenset({S.SUBMITTED.value, S.VERIFIED.value})

PROBLEM_TITLES = {
    403: "You cannot open this page",
    404: "Not found",
    409: "Not ready yet",
    410: "No longer available",
}


def _problem(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """A plain page for a refusal: its title, one sentence, a way back."""
    context = {
        "title": PROBLEM_TITLES.get(status, "Something went wrong"),
        "message": message,
        "back_url": reverse("home")
        if getattr(request.user, "is_operator", False)
        else reverse("dsar:home"),
    }
    return render(request, "dsar/problem.html", context, status=status)


def _say(request: HttpRequest, action: Callable[[], Any], success: str) -> bool:
    """Run one service call; tell the person what happened, in plain words."""
    try:
        action()
    except HeldForApproval:
        messages.info(request, "This waits for an approval before it runs.")
        return False
    except Denied as exc:
        messages.error(request, refusal_message(exc, fallback=f"That was refused: {exc.detail}"))
        return False
    except IrisError as exc:
        messages.error(request, wording.plain_error(exc.rule, exc.detail))
        return False
    messages.success(request, success)
    return True


def _see_other(url: str) -> HttpResponse:
    response = redirect(url)
    response.status_code = 303
    return response


# =========================================================================== member


def _member(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User) or user.kind != User.Kind.MEMBER:
        raise Http404("No data-rights page here.")
    return user


@dataclass(frozen=True)
class TrailStep:
    occurred_at: datetime
    label: str
    who: str
    why: str


@dataclass
class MemberRequest:
    """One request as its member reads it."""

    row: DataRightsRequest
    kind_label: str
    state_label: str
    next_text: str
    method_label: str
    trail: list[TrailStep]
    anchor: str
    can_cancel: bool
    can_appeal: bool
    needs_code: bool
    can_download: bool
    can_report: bool
    can_undo: bool = False
    summary: list[str] = field(default_factory=list)


def _summary(row: DataRightsRequest, *, to_member: bool = True) -> list[str]:
    """What the request asked for, in words: to the member, or to the legal team."""
    payload = row.payload or {}
    if row.kind == RequestKind.EXPORT:
        names = {
            "includeConsents": "consent choices",
            "includeOptOuts": "features switched off",
            "includeNotebooks": "notebooks",
            "includeSessionMemory": "memory from single conversations",
            "includeSceneMemory": "Living Scenes",
            "includePoseMemory": "pose totals",
        }
        chosen = [label for flag, label in names.items() if payload.get(flag)]
        lines = [
            ("Your memories" if to_member else "Memories")
            + (", with " + ", ".join(chosen) if chosen else "")
            + "."
        ]
        if payload.get("encrypted"):
            lines.append("Locked with your passphrase.")
        return lines
    if row.kind == RequestKind.DELETE:
        lines = []
        if payload.get("mode") == "hard":
            lines.append("Delete for good, at once.")
        else:
            lines.append("Delete, with time to change your mind.")
        kinds = [wording.MEMORY_KIND_LABELS.get(s, s) for s in payload.get("scopes", [])]
        topics = [wording.TOPIC_LABELS.get(c, c) for c in payload.get("categories", [])]
        if kinds:
            lines.append("Kinds of memory: " + ", ".join(kinds) + ".")
        if topics:
            lines.append("Topics: " + ", ".join(topics) + ".")
        if payload.get("purgeConsentLedger"):
            lines.append("With the consent history of those topics.")
        return lines
    whom = "you" if to_member else "the member"
    return [f"A read-only view of everything Iris holds about {whom}."]


def _next_text(row: DataRightsRequest, *, held: bool) -> str:
    if held and row.kind == RequestKind.DELETE and row.state in OPEN:
        return wording.HELD_NEXT
    if row.state == S.COMPLETED and row.kind in wording.READY_NEXT:
        return wording.READY_NEXT[row.kind]
    return wording.STATE_NEXT[row.state]


def _member_request(row: DataRightsRequest, *, held: bool) -> MemberRequest:
    steps = [
        TrailStep(
            occurred_at=event.occurred_at,
            label=wording.STEP_LABELS[event.to_state],
            who=wording.ACTOR_LABELS.get(event.actor_kind, "Iris"),
            why=wording.STEP_REASONS.get(event.reason_code, ""),
        )
        for event in row.trail.all()
    ]
    return MemberRequest(
        row=row,
        kind_label=wording.KIND_LABELS[row.kind],
        state_label=wording.STATE_LABELS[row.state],
        next_text=_next_text(row, held=held),
        method_label=wording.METHOD_LABELS.get(row.verification_method, ""),
        trail=steps,
        anchor=f"request-{row.id}",
        can_cancel=row.state in WAITING,
        can_appeal=row.state in (S.COMPLETED, S.FAILED),
        needs_code=row.state == S.SUBMITTED,
        can_download=row.kind == RequestKind.EXPORT and row.state == S.COMPLETED,
        can_report=row.kind == RequestKind.ACCESS and row.state == S.COMPLETED,
        # A soft deletion waiting out its grace window can still be undone.
        can_undo=row.kind == RequestKind.DELETE
        and row.state == S.IN_PROGRESS
        and row.grace_until is not None
        and row.grace_until > timezone.now(),
        summary=_summary(row),
    )


def _member_page(
    request: HttpRequest,
    member: User,
    *,
    bound: Mapping[str, django_forms.Form] | None = None,
    code_for: uuid.UUID | None = None,
    status: int = 200,
) -> HttpResponse:
    rows = selectors.member_requests(member=member)
    prefetch_related_objects(
        rows, Prefetch("trail", queryset=DataRightsEvent.objects.order_by("position"))
    )
    open_kinds = {row.kind for row in rows if row.state in OPEN}
    forms: dict[str, django_forms.Form] = {
        "export": ExportRequestForm(prefix="export"),
        "delete": DeleteRequestForm(prefix="delete"),
        **(bound or {}),
    }
    held = selectors.hold_applies(member=member)
    context = {
        "requests": [_member_request(row, held=held) for row in rows],
        "hold": held,
        "jurisdiction": wording.JURISDICTION_LABELS[selectors.jurisdiction_of(member.tenant_id)],
        "open_kinds": open_kinds,
        "export_form": forms["export"],
        "delete_form": forms["delete"],
        "code_form": forms.get("code") or CodeForm(),
        "code_for": code_for,
    }
    return render(request, "dsar/home.html", context, status=status)


def _back_home(anchor: str = "") -> HttpResponse:
    return _see_other(reverse("dsar:home") + (f"#{anchor}" if anchor else ""))


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return _member_page(request, _member(request))


def _file(
    request: HttpRequest,
    member: User,
    kind: RequestKind,
    form: RequestForm | None,
    fields: dict[str, str],
) -> HttpResponse:
    """File a request of `kind` from its form; errors come back onto the form's fields."""
    payload: dict[str, Any] = {}
    if form is not None:
        if not form.is_valid():
            return _member_page(request, member, bound={kind.value: form}, status=400)
        payload = form.payload()
    try:
        row = services.data_rights_open(
            principal=principal_of(member), member=member, kind=kind.value, payload=payload
        )
    except IrisError as exc:
        if form is None:
            messages.error(request, wording.plain_error(exc.rule, exc.detail))
            return _back_home("new-access")
        add_service_error(form, exc, fields)
        return _member_page(request, member, bound={kind.value: form}, status=400)
    messages.success(request, f"We received your request: {wording.KIND_LABELS[kind].lower()}.")
    return _back_home(f"request-{row.id}")


@login_required
@require_POST
def file_export(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    form = ExportRequestForm(request.POST, prefix="export")
    return _file(request, member, RequestKind.EXPORT, form, EXPORT_FIELDS)


@login_required
@require_POST
def file_delete(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    form = DeleteRequestForm(request.POST, prefix="delete")
    return _file(request, member, RequestKind.DELETE, form, DELETE_FIELDS)


@login_required
@require_POST
def file_access(request: HttpRequest) -> HttpResponse:
    return _file(request, _member(request), RequestKind.ACCESS, None, {})


def _member_action(
    request: HttpRequest,
    request_id: uuid.UUID,
    call: Callable[[Principal, User], Any],
    success: str,
) -> HttpResponse:
    """One service call on one of the member's own requests (anyone else's is 404)."""
    member = _member(request)
    principal = principal_of(member)
    _visible_or_404(principal, member, request_id)
    _say(request, lambda: call(principal, member), success)
    return _back_home(f"request-{request_id}")


def _member_move(
    request: HttpRequest, request_id: uuid.UUID, to: RequestState, success: str
) -> HttpResponse:
    return _member_action(
        request,
        request_id,
        lambda principal, member: services.data_rights_transition(
            principal=principal, member=member, request_id=request_id, to=to.value
        ),
        success,
    )


@login_required
@require_POST
def cancel(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    return _member_move(request, request_id, S.CANCELLED, "Cancelled. Nothing was done.")


@login_required
@require_POST
def appeal(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    return _member_move(request, request_id, S.APPEALED, "We will look at this request again.")


@login_required
@require_POST
def undo(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    return _member_action(
        request,
        request_id,
        lambda principal, member: deletion.data_rights_undo_delete(
            principal=principal, member=member, request_id=request_id
        ),
        "Undone. Your memories are back.",
    )


def _code_method(row: DataRightsRequest) -> str:
    """The method of the latest code sent for `row` (the caller has checked that the
    member may see it): a code a surface had sent by phone is checked as a phone code."""
    latest = (
        VerificationCode.objects.filter(tenant_id=row.tenant_id, request=row)
        .order_by("-created_at")
        .values_list("method", flat=True)
        .first()
    )
    return latest or VerificationMethod.EMAIL_LINK.value


@login_required
@require_POST
def send_code(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    return _member_action(
        request,
        request_id,
        lambda principal, member: services.data_rights_send_code(
            principal=principal,
            member=member,
            request_id=request_id,
            method=VerificationMethod.EMAIL_LINK.value,
        ),
        "We emailed you a code. Type it below to confirm the request.",
    )


@login_required
@require_POST
def verify(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    principal = principal_of(member)
    row = _visible_or_404(principal, member, request_id)
    form = CodeForm(request.POST)
    if form.is_valid():
        method = _code_method(row)
        if method not in {m.value for m in CODE_METHODS}:
            method = VerificationMethod.EMAIL_LINK.value
        try:
            services.data_rights_verify(
                principal=principal,
                member=member,
                request_id=row.id,
                method=method,
                code=form.cleaned_data["code"],
            )
        except IrisError as exc:
            add_service_error(form, exc, {"code": "code"})
        else:
            messages.success(request, "Thank you: the request is confirmed.")
            return _back_home(f"request-{row.id}")
    return _member_page(request, member, bound={"code": form}, code_for=row.id, status=400)


def _visible_or_404(
    principal: Principal, member: User | None, request_id: uuid.UUID
) -> DataRightsRequest:
    try:
        return services._visible(principal, member, request_id)
    except NotFound:
        raise Http404("No such data-rights request.") from None


@login_required
@require_GET
def download(request: HttpRequest, request_id: uuid.UUID) -> HttpResponseBase:
    member = _member(request)
    _visible_or_404(principal_of(member), member, request_id)
    try:
        path, file_name = export.bundle_for_download(
            principal=principal_of(member), member=member, request_id=request_id
        )
    except IrisError as exc:
        messages_by_status = {
            404: "There is no copy of your data here.",
            409: "Your copy is not ready yet. Come back to your data requests page later.",
            410: "This copy is no longer available: copies are kept for a limited time. "
            "Ask for a new one from your data requests page.",
        }
        return _problem(request, exc.status, messages_by_status.get(exc.status, exc.detail))
    return FileResponse(
        path.open("rb"), as_attachment=True, filename=file_name, content_type="application/zip"
    )


@dataclass(frozen=True)
class ReportField:
    label: str
    text: str
    # An id or a fingerprint: one long token, wrapped anywhere so it never widens the page.
    token: bool = False


@dataclass(frozen=True)
class ReportPart:
    """One section of the access report, ready to show: one document, or its records."""

    title: str
    anchor: str
    fields: list[ReportField] = field(default_factory=list)
    records: list[list[ReportField]] = field(default_factory=list)
    is_list: bool = False


def _words(key: str) -> str:
    """`consentEvents` -> `Consent events`, `recall_log` -> `Recall log`."""
    out: list[str] = []
    for ch in key.replace("_", " ").replace("-", " "):
        if ch.isupper() and out and out[-1] != " ":
            out.append(" ")
        out.append(ch.lower())
    text = "".join(out).strip()
    return text[:1].upper() + text[1:]


def _when(value: str) -> str | None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None or "T" not in value:
        return None
    return f"{moment.astimezone(UTC):%-d %B %Y, %H:%M} UTC"


def _value(key: str, value: Any) -> str:
    """One value in words: a label where Iris has one, a date as a date."""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, Mapping):
        return "; ".join(
            f"{_words(str(k))}: {_value(str(k), v)}" for k, v in value.items() if _shown(v)
        )
    if isinstance(value, list | tuple):
        return ", ".join(_value(key, v) for v in value if _shown(v))
    if isinstance(value, str):
        label = wording.report_label(key, value)
        if label is not None:
            return label
        return _when(value) or value
    return str(value)


def _shown(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _fields(record: Mapping[str, Any]) -> list[ReportField]:
    found = []
    for key, value in record.items():
        if not _shown(value):
            continue
        text = _value(str(key), value)
        if not text:
            continue
        found.append(ReportField(_words(str(key)), text, token=" " not in text and len(text) > 24))
    return found


def _report_parts(data: Mapping[str, Any]) -> list[ReportPart]:
    """The report's sections, and what it says about itself first."""
    about = {k: v for k, v in data.items() if k != "sections"}
    parts = [ReportPart("About this report", "about", fields=_fields(about))] if about else []
    sections = data.get("sections")
    for name, value in sections.items() if isinstance(sections, Mapping) else ():
        title = wording.REPORT_SECTIONS.get(name, _words(name))
        anchor = f"section-{name}"
        if isinstance(value, list):
            records = [_fields(r) if isinstance(r, Mapping) else [] for r in value]
            parts.append(ReportPart(title, anchor, records=records, is_list=True))
        elif isinstance(value, Mapping):
            parts.append(ReportPart(title, anchor, fields=_fields(value)))
        else:
            parts.append(ReportPart(title, anchor))
    return parts


@login_required
@require_GET
def report(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    row = _visible_or_404(principal_of(member), member, request_id)
    if row.kind != RequestKind.ACCESS:
        raise Http404("Only an access request has a report.")
    if row.state != S.COMPLETED:
        return _problem(request, 409, "Your report is not ready yet. Come back later.")
    try:
        data = access.access_report(member=member)
    except IrisError as exc:
        return _problem(request, exc.status, wording.plain_error(exc.rule, exc.detail))
    parts = _report_parts(data or {})
    return render(request, "dsar/report.html", {"row": row, "parts": parts})


# =========================================================================== legal queue


class _NotLegal(Exception):
    pass


def _legal(request: HttpRequest) -> tuple[User, Principal]:
    user = request.user
    if not isinstance(user, User) or not user.is_operator:
        raise _NotLegal
    principal = principal_of(user)
    if not selectors.is_legal(principal) or not user.has_perm(
        "governance.work_data_rights", user.tenant
    ):
        raise _NotLegal
    return user, principal


def legal_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed in, an operator of the legal role with `work_data_rights` on their tenant;
    anyone else is shown a plain 403 page."""

    @login_required
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            user, principal = _legal(request)
        except _NotLegal:
            return _problem(
                request, 403, "The data-rights queue is for the legal team of your organisation."
            )
        return view(request, user, principal, *args, **kwargs)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


@dataclass(frozen=True)
class Bucket:
    label: str
    count: int
    overdue: bool
    y: int
    width: int
    text_x: int


# Days left: (label, lowest, highest); None is open-ended.
BUCKETS: tuple[tuple[str, int | None, int | None], ...] = (
    ("Overdue", None, -1),
    ("0–3 days", 0, 3),
    ("4–7 days", 4, 7),
    ("8–14 days", 8, 14),
    ("15–30 days", 15, 30),
    ("Over 30 days", 31, None),
)
CHART_LABEL_WIDTH = 130
CHART_BAR_MAX = 300
CHART_ROW = 32


def bucket_counts(days: Iterable[int]) -> list[tuple[str, int]]:
    counts = dict.fromkeys((label for label, _, _ in BUCKETS), 0)
    for left in days:
        for label, low, high in BUCKETS:
            if (low is None or left >= low) and (high is None or left <= high):
                counts[label] += 1
                break
    return list(counts.items())


def _chart(counts: list[tuple[str, int]]) -> list[Bucket]:
    most = max((n for _, n in counts), default=0) or 1
    bars = []
    for index, (label, count) in enumerate(counts):
        width = round(CHART_BAR_MAX * count / most)
        bars.append(
            Bucket(
                label=label,
                count=count,
                overdue=index == 0,
                y=index * CHART_ROW,
                width=width,
                text_x=CHART_LABEL_WIDTH + width + 8,
            )
        )
    return bars


@dataclass(frozen=True)
class QueueRow:
    row: DataRightsRequest
    kind_label: str
    state_label: str
    days_left: int
    days_text: str
    overdue: bool
    reminder: bool
    held: bool


def _held_member_ids(tenant_id: uuid.UUID) -> set[int]:
    return set(
        LegalHold.objects.filter(tenant_id=tenant_id, lifted_at__isnull=True).values_list(
            "member_id", flat=True
        )
    )


def _queue_row(row: DataRightsRequest, now: datetime, held: set[int]) -> QueueRow:
    left = deadlines.days_left(row.due_at, now)
    return QueueRow(
        row=row,
        kind_label=wording.QUEUE_KIND_LABELS[row.kind],
        state_label=wording.QUEUE_STATE_LABELS[row.state],
        days_left=left,
        days_text=wording.days_phrase(left),
        overdue=row.due_at < now,
        reminder=row.reminded_at is not None or deadlines.reminder_due(row.due_at, now),
        held=row.member_id in held,
    )


@legal_only
@require_GET
def queue(request: HttpRequest, user: User, principal: Principal) -> HttpResponse:
    now = timezone.now()
    held = _held_member_ids(user.tenant_id)
    rows = [_queue_row(r, now, held) for r in selectors.open_queue(tenant_id=user.tenant_id)]
    counts = bucket_counts(r.days_left for r in rows)
    bars = _chart(counts)
    context = {
        "rows": rows,
        "bars": bars,
        "chart_height": len(bars) * CHART_ROW,
        "chart_label_width": CHART_LABEL_WIDTH,
        "chart_summary": ", ".join(f"{label}: {n}" for label, n in counts),
        "overdue_count": sum(1 for r in rows if r.overdue),
        "reminder_count": sum(1 for r in rows if r.reminder and not r.overdue),
        "now": now,
    }
    return render(request, "dsar/queue.html", context)


def _queue_detail_page(
    request: HttpRequest,
    user: User,
    principal: Principal,
    request_id: uuid.UUID,
    *,
    bound: Mapping[str, django_forms.Form] | None = None,
    status: int = 200,
) -> HttpResponse:
    row = _visible_or_404(principal, None, request_id)
    now = timezone.now()
    trail = list(row.trail.order_by("position"))
    hold = selectors.active_hold(row.member)
    forms: dict[str, django_forms.Form] = {
        "verify": OperatorVerifyForm(prefix="verify"),
        "extend": ExtendForm(prefix="extend"),
        "fail": FailForm(prefix="fail"),
        "hold": HoldForm(prefix="hold"),
        **(bound or {}),
    }
    context = {
        "item": _queue_row(row, now, {row.member_id} if hold else set()),
        "row": row,
        "trail": [
            {
                "event": e,
                "state": wording.QUEUE_STATE_LABELS[e.to_state],
                "who": wording.QUEUE_ACTOR_LABELS.get(e.actor_kind, e.actor_kind),
            }
            for e in trail
        ],
        "hold": hold,
        "verify_window_passed": row.state == S.SUBMITTED and now >= row.verify_by,
        "method_label": wording.QUEUE_METHOD_LABELS.get(row.verification_method, ""),
        "summary": _summary(row, to_member=False),
        # A form that came back with errors stays on the page, so its errors are read.
        "can_verify": row.state == S.SUBMITTED or "verify" in (bound or {}),
        "can_start": row.state in (S.VERIFIED, S.APPEALED),
        "can_finish": row.state == S.IN_PROGRESS or "fail" in (bound or {}),
        # One extension, decided before the first deadline (dsar.deadlines).
        "can_extend": (
            row.state in OPEN
            and row.extended_at is None
            and now < selectors.clock_of(row).extend_by
        )
        or "extend" in (bound or {}),
        "extend_until": selectors.clock_of(row).extended_due_at,
        "forms": forms,
    }
    return render(request, "dsar/queue_detail.html", context, status=status)


def _back_to_item(request_id: uuid.UUID) -> HttpResponse:
    return _see_other(reverse("dsar:queue_item", kwargs={"request_id": request_id}))


@legal_only
@require_GET
def queue_item(
    request: HttpRequest, user: User, principal: Principal, request_id: uuid.UUID
) -> HttpResponse:
    return _queue_detail_page(request, user, principal, request_id)


def _operator_form_action(
    request: HttpRequest,
    user: User,
    principal: Principal,
    request_id: uuid.UUID,
    *,
    name: str,
    form: django_forms.Form,
    action: Callable[[dict[str, Any]], Any],
    success: str,
    fields: dict[str, str],
) -> HttpResponse:
    """Validate `form`, run `action` with its data; errors go back onto its fields."""
    _visible_or_404(principal, None, request_id)
    if form.is_valid():
        try:
            action(form.cleaned_data)
        except NotFound:
            raise Http404("No such data-rights request.") from None
        except IrisError as exc:
            add_service_error(form, exc, fields)
        else:
            messages.success(request, success)
            return _back_to_item(request_id)
    return _queue_detail_page(request, user, principal, request_id, bound={name: form}, status=400)


@legal_only
@require_POST
def queue_verify(
    request: HttpRequest, user: User, principal: Principal, request_id: uuid.UUID
) -> HttpResponse:
    return _operator_form_action(
        request,
        user,
        principal,
        request_id,
        name="verify",
        form=OperatorVerifyForm(request.POST, prefix="verify"),
        action=lambda data: services.data_rights_verify(
            principal=principal,
            member=None,
            request_id=request_id,
            method=data["method"],
            reference=data["reference"],
        ),
        success="Verified. The work starts now.",
        fields={"method": "method", "reference": "reference"},
    )


@legal_only
@require_POST
def queue_extend(
    request: HttpRequest, user: User, principal: Principal, request_id: uuid.UUID
) -> HttpResponse:
    return _operator_form_action(
        request,
        user,
        principal,
        request_id,
        name="extend",
        form=ExtendForm(request.POST, prefix="extend"),
        action=lambda data: services.data_rights_extend(
            principal=principal, request_id=request_id, reason=data["reason"]
        ),
        success="Extended. The member is told the new date and your reason.",
        fields={"reason": "reason", "extend": "reason"},
    )


@legal_only
@require_POST
def queue_fail(
    request: HttpRequest, user: User, principal: Principal, request_id: uuid.UUID
) -> HttpResponse:
    row = _visible_or_404(principal, None, request_id)
    return _operator_form_action(
        request,
        user,
        principal,
        request_id,
        name="fail",
        form=FailForm(request.POST, prefix="fail"),
        action=lambda data: services.data_rights_transition(
            principal=principal,
            member=row.member,
            request_id=request_id,
            to=S.FAILED.value,
            reason_code=data["reason"],
        ),
        success="Marked as failed. The member sees why.",
        fields={"reasonCode": "reason", "to": "reason"},
    )


def _move(
    request: HttpRequest, principal: Principal, request_id: uuid.UUID, to: RequestState, done: str
) -> HttpResponse:
    row = _visible_or_404(principal, None, request_id)
    _say(
        request,
        lambda: services.data_rights_transition(
            principal=principal, member=row.member, request_id=request_id, to=to.value
        ),
        done,
    )
    return _back_to_item(request_id)


@legal_only
@require_POST
def queue_start(
    request: HttpRequest, user: User, principal: Principal, request_id: uuid.UUID
) -> HttpResponse:
    return _move(request, principal, request_id, S.IN_PROGRESS, "Started.")


@legal_only
@require_POST
def queue_complete(
    request: HttpRequest, user: User, principal: Principal, request_id: uuid.UUID
) -> HttpResponse:
    return _move(request, principal, request_id, S.COMPLETED, "Completed.")


def _tenant_member(user: User, member_id: uuid.UUID) -> User:
    member = User.objects.filter(
        tenant_id=user.tenant_id, public_id=member_id, kind=User.Kind.MEMBER
    ).first()
    if member is None:
        raise Http404("No such member.")
    return member


def _hold_redirect(request: HttpRequest) -> HttpResponse:
    back = request.POST.get("request_id", "")
    try:
        return _back_to_item(uuid.UUID(back))
    except ValueError:
        return _see_other(reverse("dsar:queue"))


@legal_only
@require_POST
def hold_place(
    request: HttpRequest, user: User, principal: Principal, member_id: uuid.UUID
) -> HttpResponse:
    member = _tenant_member(user, member_id)
    form = HoldForm(request.POST, prefix="hold")
    if form.is_valid():
        try:
            services.legal_hold_place(
                principal=principal, member=member, reason=form.cleaned_data["reason"]
            )
        except IrisError as exc:
            add_service_error(form, exc, {"reason": "reason", "member": "reason"})
        else:
            messages.success(request, "Legal hold placed. Deletion waits until it is lifted.")
            return _hold_redirect(request)
    try:
        request_id = uuid.UUID(request.POST.get("request_id", ""))
    except ValueError:
        raise Http404("No such data-rights request.") from None
    return _queue_detail_page(
        request, user, principal, request_id, bound={"hold": form}, status=400
    )


@legal_only
@require_POST
def hold_lift(
    request: HttpRequest, user: User, principal: Principal, member_id: uuid.UUID
) -> HttpResponse:
    member = _tenant_member(user, member_id)
    _say(
        request,
        lambda: services.legal_hold_lift(principal=principal, member=member),
        "Legal hold lifted. Deletions that waited for it go ahead.",
    )
    return _hold_redirect(request)
