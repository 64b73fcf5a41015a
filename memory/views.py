"""The member's memory pages ("What we remember"): see, correct, pause, move and forget.

Server-rendered and usable without JavaScript: every action is a plain form POST with a
CSRF token that redirects back (post/redirect/get). Members only: an operator, and anyone
asking for another member's entry, gets 404. Every change goes through
`memory.services` with the member's own principal; reads through `memory.selectors`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from consent.enums import is_sensitive
from governance import vocabulary
from governance.approvals import approvals_pending_for
from governance.errors import IrisError, NotFound, ValidationFailed
from governance.models import User
from governance.pipeline import Denied, HeldForApproval
from governance.principal import Principal, principal_of
from governance.refusals import refusal_message
from memory import selectors, services
from memory.enums import Lifecycle, ScopeKind
from memory.models import BODY_MAX_LENGTH, MemoryEntry
from memory.recall.service import recent_recalls
from memory.rules.retention import purge_due_at
from memory.rules.scopes import check_scope_change

LIST_LIMIT = 200

# The member's words for scopes and origins are governance.vocabulary's.
SCOPE_LABELS: dict[str, str] = vocabulary.SCOPE_LABELS
ORIGIN_LABELS: dict[str, str] = vocabulary.ORIGIN_LABELS

# Where a member may move a memory from each kind (the rule itself is memory.rules.scopes).
SCOPE_TARGETS: tuple[str, ...] = (ScopeKind.PROFILE.value, ScopeKind.NOTEBOOK.value)
DEFAULT_NOTEBOOK = "personal"


class CorrectionForm(forms.Form):
    body = forms.CharField(
        label="What Iris should remember",
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=BODY_MAX_LENGTH,
        strip=True,
    )
    category = forms.ChoiceField(label="Topic", choices=vocabulary.topic_choices())


class ScopeForm(forms.Form):
    scope_kind = forms.ChoiceField(label="Move to", choices=[(k, k) for k in SCOPE_TARGETS])
    notebook_id = forms.SlugField(label="Notebook", required=False, max_length=64)


class ConflictAnswerForm(forms.Form):
    answer = forms.ChoiceField(choices=[(a, a) for a in services.CONFLICT_ANSWERS])


class OffTheRecordForm(forms.Form):
    enabled = forms.BooleanField(required=False)


# ------------------------------------------------------------------------- helpers


def _member(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User) or user.kind != User.Kind.MEMBER:
        raise Http404("No memory page here.")
    return user


def _principal(request: HttpRequest) -> Principal:
    return principal_of(request.user)


def _entry(request: HttpRequest, member: User, entry_id: uuid.UUID) -> MemoryEntry:
    try:
        return selectors.memory_get(principal=_principal(request), member=member, entry_id=entry_id)
    except NotFound:
        raise Http404("No such memory.") from None


def _act(request: HttpRequest, action: Callable[[], Any], success: str) -> Any:
    """Run one service call and turn its outcome into a message for the member."""
    try:
        result = action()
    except HeldForApproval:
        messages.info(
            request,
            "This is waiting for your approval. Approve or decline it in the card below.",
        )
        return None
    except Denied as exc:
        messages.error(request, refusal_message(exc, fallback=f"That was refused: {exc.detail}"))
        return None
    except IrisError as exc:
        messages.error(request, refusal_message(exc, fallback=f"Nothing was changed: {exc.detail}"))
        return None
    messages.success(request, success)
    return result if result is not None else True


def _back_to(entry_id: uuid.UUID) -> HttpResponse:
    return redirect("memory:detail", entry_id=entry_id)


@dataclass(frozen=True)
class ScopeGroup:
    kind: str
    label: str
    entries: list[MemoryEntry]


@dataclass(frozen=True)
class Question:
    id: uuid.UUID
    text: str
    entry_id: uuid.UUID


def _questions(member: User, principal: Principal) -> list[Question]:
    found = []
    for conflict in selectors.pending_conflicts(member=member):
        try:
            prior = selectors.memory_get(
                principal=principal, member=member, entry_id=conflict.entry_id
            )
        except NotFound:
            continue
        text = selectors.conflict_question(
            prior_body=prior.body, proposed_body=str(conflict.proposal.get("body", ""))
        )
        found.append(Question(conflict.id, text, conflict.entry_id))
    return found


# --------------------------------------------------------------------------- pages


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    principal = _principal(request)
    page = selectors.memory_list(principal=principal, member=member, limit=LIST_LIMIT)
    groups: dict[str, list[MemoryEntry]] = {}
    for entry in page.entries:
        entry.origin_label = ORIGIN_LABELS.get(entry.origin, entry.origin)  # type: ignore[attr-defined]
        groups.setdefault(entry.scope_kind, []).append(entry)
    ordered = [
        ScopeGroup(kind, SCOPE_LABELS.get(kind, kind), groups[kind])
        for kind in (k.value for k in ScopeKind)
        if kind in groups
    ]
    context = {
        "groups": ordered,
        "more": page.next_cursor is not None,
        "off_the_record": selectors.off_the_record_toggles(member=member),
        "questions": _questions(member, principal),
        "approvals": approvals_pending_for(member=member),
    }
    return render(request, "memory/home.html", context)


@login_required
@require_GET
def detail(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    entry = _entry(request, member, entry_id)
    history = selectors.memory_history(
        principal=_principal(request), member=member, entry_id=entry_id
    )
    tombstoned = entry.lifecycle == Lifecycle.TOMBSTONED
    targets = [k for k in SCOPE_TARGETS if check_scope_change(entry.scope_kind, k).allowed]
    context = {
        "entry": entry,
        "history": list(reversed(history)),
        "tombstoned": tombstoned,
        "purge_at": purge_due_at(entry.updated_at) if tombstoned else None,
        "sensitive": is_sensitive(entry.category),
        "origin_label": ORIGIN_LABELS.get(entry.origin, entry.origin),
        "scope_label": SCOPE_LABELS.get(entry.scope_kind, entry.scope_kind),
        "scope_targets": targets,
        "recalls": recent_recalls(member=member, entry_id=entry.entry_id),
        "approvals": approvals_pending_for(member=member),
    }
    return render(request, "memory/detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def edit(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    entry = _entry(request, member, entry_id)
    if entry.lifecycle == Lifecycle.TOMBSTONED:
        raise Http404("A forgotten memory cannot be edited.")
    if request.method == "POST":
        form = CorrectionForm(request.POST)
        if form.is_valid():
            correction = services.Correction(
                body=form.cleaned_data["body"], category=form.cleaned_data["category"]
            )
            try:
                outcome = services.memory_correct(
                    principal=_principal(request),
                    member=member,
                    entry_id=entry.entry_id,
                    correction=correction,
                )
            except ValidationFailed as exc:
                field = exc.field if exc.field in form.fields else None
                form.add_error(field, exc.detail)
            except HeldForApproval:
                messages.info(request, "This change is waiting for your approval.")
                return _back_to(entry.entry_id)
            except IrisError as exc:
                form.add_error(None, refusal_message(exc))
            else:
                if outcome.written:
                    messages.success(request, "Saved. Iris now remembers your correction.")
                else:
                    messages.info(request, "Nothing changed: that is what Iris already had.")
                return _back_to(entry.entry_id)
        status = 400
    else:
        form = CorrectionForm(initial={"body": entry.body, "category": entry.category})
        status = 200
    return render(request, "memory/edit.html", {"entry": entry, "form": form}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def forget(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    entry = _entry(request, member, entry_id)
    if request.method == "POST":
        done = _act(
            request,
            lambda: services.memory_forget(
                principal=_principal(request), member=member, entry_id=entry.entry_id
            ),
            "Forgotten. The assistant will no longer use it; its text is erased for good "
            "after the grace period.",
        )
        return redirect("memory:home") if done else _back_to(entry.entry_id)
    return render(request, "memory/forget.html", {"entry": entry})


@login_required
@require_POST
def pause(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    entry = _entry(request, member, entry_id)
    _act(
        request,
        lambda: services.memory_pause(
            principal=_principal(request), member=member, entry_id=entry.entry_id
        ),
        "Paused. The assistant will not use this memory until you resume it.",
    )
    return _back_to(entry.entry_id)


@login_required
@require_POST
def resume(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    entry = _entry(request, member, entry_id)
    _act(
        request,
        lambda: services.memory_resume(
            principal=_principal(request), member=member, entry_id=entry.entry_id
        ),
        "Resumed. The assistant may use this memory again.",
    )
    return _back_to(entry.entry_id)


@login_required
@require_POST
def change_scope(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    entry = _entry(request, member, entry_id)
    form = ScopeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose where to move the memory. Nothing was changed.")
        return _back_to(entry.entry_id)
    kind = form.cleaned_data["scope_kind"]
    identifiers: dict[str, str] = {"userId": str(member.public_id)}
    if kind == ScopeKind.NOTEBOOK:
        identifiers["notebookId"] = form.cleaned_data["notebook_id"] or DEFAULT_NOTEBOOK
    _act(
        request,
        lambda: services.memory_change_scope(
            principal=_principal(request),
            member=member,
            entry_id=entry.entry_id,
            scope_kind=kind,
            scope_identifiers=identifiers,
        ),
        f"Moved to {SCOPE_LABELS.get(kind, kind).lower()}.",
    )
    return _back_to(entry.entry_id)


@login_required
@require_POST
def off_the_record(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    form = OffTheRecordForm(request.POST)
    enabled = form.is_valid() and form.cleaned_data["enabled"]
    _act(
        request,
        lambda: services.off_the_record_set(
            principal=_principal(request), member=member, enabled=enabled
        ),
        "Off the record: Iris remembers nothing new until you switch this off."
        if enabled
        else "Back on the record: Iris may remember again.",
    )
    return redirect(reverse("memory:home") + "#off-the-record")


@login_required
@require_POST
def answer_conflict(request: HttpRequest, conflict_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    if not any(c.id == conflict_id for c in selectors.pending_conflicts(member=member)):
        raise Http404("No such question.")
    form = ConflictAnswerForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose update or keep. Nothing was changed.")
        return redirect("memory:home")
    answer = form.cleaned_data["answer"]
    _act(
        request,
        lambda: services.memory_conflict_answer(
            principal=_principal(request), member=member, conflict_id=conflict_id, answer=answer
        ),
        "Updated." if answer == "update" else "Kept what Iris already had.",
    )
    return redirect("memory:home")
