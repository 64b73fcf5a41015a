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
from datetime import datetime
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
from governance.vocabulary import MEMORY_ACTIONS as WORDS
from memory import selectors, services, step_up
from memory.enums import Lifecycle, Origin, ScopeKind
from memory.models import BODY_MAX_LENGTH, MemoryEntry
from memory.recall.service import recent_recalls
from memory.rules.retention import SOFT_DELETE_GRACE, purge_due_at
from memory.rules.scopes import scope_change_targets

LIST_LIMIT = 200

# The member's words for scopes and origins are governance.vocabulary's.
SCOPE_LABELS: dict[str, str] = vocabulary.SCOPE_LABELS
ORIGIN_LABELS: dict[str, str] = vocabulary.ORIGIN_LABELS

DEFAULT_NOTEBOOK = "personal"
NOTEBOOK_NAME_MAX = 64


def topic_label(category: str) -> str:
    """A topic as the member reads it."""
    return vocabulary.label("topic", category)


class CorrectionForm(forms.Form):
    body = forms.CharField(
        label="What Iris should remember",
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=BODY_MAX_LENGTH,
        strip=True,
    )
    category = forms.ChoiceField(label="Topic", choices=vocabulary.topic_choices())


class ScopeForm(forms.Form):
    """Any kind parses; whether this entry may go there is the rule's answer (checked in
    the view before the service, which checks it again)."""

    scope_kind = forms.ChoiceField(label="Move to", choices=[(k.value, k.value) for k in ScopeKind])
    notebook_id = forms.CharField(label="Notebook", required=False, max_length=NOTEBOOK_NAME_MAX)
    new_notebook = forms.CharField(
        label=WORDS["notebook_new"], required=False, max_length=NOTEBOOK_NAME_MAX, strip=True
    )

    def notebook(self) -> str:
        return self.cleaned_data["new_notebook"] or self.cleaned_data["notebook_id"].strip()


class ConflictAnswerForm(forms.Form):
    answer = forms.ChoiceField(choices=[(a, a) for a in services.CONFLICT_ANSWERS])
    back = forms.ChoiceField(choices=[("home", "home"), ("detail", "detail")], required=False)


class StepUpForm(forms.Form):
    password = forms.CharField(
        label=WORDS["step_up_label"],
        required=False,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text=WORDS["step_up_help"],
    )


class ForgetTopicForm(StepUpForm):
    category = forms.ChoiceField(label="Topic")

    def __init__(self, *args: Any, topics: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["category"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = topics
        # The topic comes first on the page, the password after it.
        self.order_fields(["category", "password"])


class OffTheRecordForm(forms.Form):
    enabled = forms.BooleanField(required=False)


# ------------------------------------------------------------------------- helpers


def _now() -> datetime:
    """The clock of these pages (the step-up's, so one fixed clock fixes both)."""
    return step_up.now()


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


def _undo_until(at: datetime) -> str:
    return purge_due_at(at).strftime("%-d %B %Y")


def _is_guess(entry: MemoryEntry) -> bool:
    return entry.origin == Origin.MODEL_INFERRED


def _notebook_of(entry: MemoryEntry) -> str:
    return str((entry.scope_identifiers or {}).get("notebookId", ""))


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


@dataclass(frozen=True)
class Move:
    """One move the rules allow for an entry, as the page offers it."""

    target: str
    label: str
    to_notebook: bool


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


def _moves(entry: MemoryEntry) -> list[Move]:
    """Every move `memory.rules.scopes` allows from this entry's scope, and only those."""
    if entry.read_only_copy_of is not None:
        return []
    return [
        Move(target.value, WORDS[change.reason_code], target is ScopeKind.NOTEBOOK)
        for target, change in scope_change_targets(entry.scope_kind)
    ]


def _groups(entries: list[MemoryEntry]) -> list[ScopeGroup]:
    """The list by scope, in `ScopeKind` order; notebooks one group each, by name."""
    groups: dict[str, list[MemoryEntry]] = {}
    for entry in entries:
        entry.origin_label = ORIGIN_LABELS.get(entry.origin, "")  # type: ignore[attr-defined]
        entry.topic_label = topic_label(entry.category)  # type: ignore[attr-defined]
        entry.is_guess = _is_guess(entry)  # type: ignore[attr-defined]
        groups.setdefault(entry.scope_kind, []).append(entry)
    ordered = []
    for kind in (k.value for k in ScopeKind):
        if kind not in groups:
            continue
        if kind != ScopeKind.NOTEBOOK:
            ordered.append(ScopeGroup(kind, SCOPE_LABELS[kind], groups[kind]))
            continue
        notebooks: dict[str, list[MemoryEntry]] = {}
        for entry in groups[kind]:
            notebooks.setdefault(_notebook_of(entry), []).append(entry)
        for index, name in enumerate(sorted(notebooks)):
            ordered.append(ScopeGroup(f"notebook-{index}", f"Notebook “{name}”", notebooks[name]))
    return ordered


# --------------------------------------------------------------------------- pages


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    principal = _principal(request)
    page = selectors.memory_list(principal=principal, member=member, limit=LIST_LIMIT)
    forgotten = selectors.recently_forgotten(principal=principal, member=member, now=_now())
    context = {
        "groups": _groups(page.entries),
        "more": page.next_cursor is not None,
        "off_the_record": selectors.off_the_record_toggles(member=member),
        "questions": _questions(member, principal),
        "approvals": approvals_pending_for(member=member),
        "forgotten_count": len(forgotten),
        "words": WORDS,
    }
    return render(request, "memory/home.html", context)


@login_required
@require_GET
def detail(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    principal = _principal(request)
    entry = _entry(request, member, entry_id)
    history = selectors.memory_history(principal=principal, member=member, entry_id=entry_id)
    tombstoned = entry.lifecycle == Lifecycle.TOMBSTONED
    purge_at = purge_due_at(entry.updated_at) if tombstoned else None
    moves = _moves(entry)
    for revision in history:
        revision.state_label = vocabulary.label("lifecycle", revision.lifecycle)  # type: ignore[attr-defined]
    provenance = [
        {**link, "label": vocabulary.label("provenance", link.get("kind"))}
        for link in entry.provenance_chain or []
    ]
    context = {
        "entry": entry,
        "heading": entry.subject or entry.body[:80],
        "history": list(reversed(history)),
        "tombstoned": tombstoned,
        "purge_at": purge_at,
        "restorable": purge_at is not None and _now() < purge_at,
        "sensitive": is_sensitive(entry.category),
        "topic_label": topic_label(entry.category),
        "origin_label": ORIGIN_LABELS.get(entry.origin, ""),
        "scope_label": SCOPE_LABELS.get(entry.scope_kind, ""),
        "notebook": _notebook_of(entry),
        "guess": _is_guess(entry),
        "moves": moves,
        "notebook_move": any(move.to_notebook for move in moves),
        "provenance": provenance,
        "notebooks": selectors.member_notebooks(principal=principal, member=member),
        "questions": [q for q in _questions(member, principal) if q.entry_id == entry.entry_id],
        "recalls": recent_recalls(member=member, entry_id=entry.entry_id),
        "approvals": approvals_pending_for(member=member),
        "words": WORDS,
    }
    return render(request, "memory/detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def edit(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    """Edit a memory; for a guess this is Correct: the page says that what the member
    writes becomes what they said, so the change of origin is the member's choice."""
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
    context = {"entry": entry, "form": form, "guess": _is_guess(entry), "words": WORDS}
    return render(request, "memory/edit.html", context, status=status)


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
            f"Forgotten. The assistant will no longer use it. You can undo this until "
            f"{_undo_until(_now())} under “{WORDS['forgotten_heading']}”.",
        )
        return redirect("memory:home") if done else _back_to(entry.entry_id)
    context = {"entry": entry, "undo_until": _undo_until(_now()), "words": WORDS}
    return render(request, "memory/forget.html", context)


EntryCall = Callable[[Principal, User, MemoryEntry], Any]
EntryView = Callable[[HttpRequest, uuid.UUID], HttpResponse]


def _entry_action(call: EntryCall, success: Callable[[], str]) -> EntryView:
    """A POST-only page action: one service call on one of the member's entries (404 for
    anyone else's), then back to the entry's page with what happened."""

    @login_required
    @require_POST
    def view(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
        member = _member(request)
        entry = _entry(request, member, entry_id)
        _act(request, lambda: call(_principal(request), member, entry), success())
        return _back_to(entry.entry_id)

    return view


def _reject_guess(principal: Principal, member: User, entry: MemoryEntry) -> Any:
    """Reject a guess: it is forgotten, and can be brought back like any forgotten memory."""
    if not _is_guess(entry):
        raise ValidationFailed(
            "Only a guess can be rejected; use Forget for this memory.", rule="not-a-guess"
        )
    return services.memory_forget(
        principal=principal, member=member, entry_id=entry.entry_id, reason_code="guess-rejected"
    )


pause = _entry_action(
    lambda p, m, e: services.memory_pause(principal=p, member=m, entry_id=e.entry_id),
    lambda: "Paused. The assistant will not use this memory until you resume it.",
)
resume = _entry_action(
    lambda p, m, e: services.memory_resume(principal=p, member=m, entry_id=e.entry_id),
    lambda: "Resumed. The assistant may use this memory again.",
)
confirm = _entry_action(
    lambda p, m, e: services.memory_confirm(principal=p, member=m, entry_id=e.entry_id),
    lambda: WORDS["confirmed"],
)
reject = _entry_action(
    _reject_guess,
    lambda: f"{WORDS['rejected']} You can undo this until {_undo_until(_now())}.",
)
restore = _entry_action(
    lambda p, m, e: services.memory_restore(principal=p, member=m, entry_id=e.entry_id, now=_now()),
    lambda: WORDS["undo_done"],
)


@login_required
@require_GET
def forgotten(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    entries = selectors.recently_forgotten(principal=_principal(request), member=member, now=_now())
    for entry in entries:
        entry.undo_until = purge_due_at(entry.updated_at)  # type: ignore[attr-defined]
        entry.topic_label = topic_label(entry.category)  # type: ignore[attr-defined]
    context = {"entries": entries, "words": WORDS, "grace_days": SOFT_DELETE_GRACE.days}
    return render(request, "memory/forgotten.html", context)


def _topics(member: User, principal: Principal) -> list[tuple[str, str]]:
    """The topics the member has live memories in, with how many each."""
    counts: dict[str, int] = {}
    for entry in selectors.memory_list(
        principal=principal, member=member, limit=LIST_LIMIT
    ).entries:
        counts[entry.category] = counts.get(entry.category, 0) + 1
    return [
        (category, f"{topic_label(category)} ({n} memor{'y' if n == 1 else 'ies'})")
        for category, n in sorted(counts.items(), key=lambda item: topic_label(item[0]))
    ]


def _forget_many(request: HttpRequest, *, everything: bool) -> HttpResponse:
    """Forget a topic or everything: a fresh step-up first, then `memory_clear`, which the
    kernel holds for the member's approval (the card is shown on the same page)."""
    member = _member(request)
    principal = _principal(request)
    now = _now()
    topics = [] if everything else _topics(member, principal)
    form: StepUpForm
    form_class: Callable[..., StepUpForm]
    form_class = (
        StepUpForm if everything else (lambda *a, **k: ForgetTopicForm(*a, topics=topics, **k))
    )
    status = 200
    if request.method == "POST":
        form = form_class(request.POST)
        if form.is_valid():
            if not step_up.is_fresh(request, now):
                password = form.cleaned_data["password"]
                if not password:
                    form.add_error("password", WORDS["step_up_missing"])
                elif not step_up.verify(request, password, now):
                    form.add_error("password", WORDS["step_up_wrong"])
        if form.is_valid():
            category = None if everything else form.cleaned_data["category"]
            result = _act(
                request,
                lambda: services.memory_clear(
                    principal=principal, member=member, category=category, now=now
                ),
                f"Forgotten. You can undo this until {_undo_until(now)}.",
            )
            if result is not None:
                return redirect("memory:forgotten")
            return redirect(request.path)
        status = 400
    else:
        form = form_class()
    context = {
        "form": form,
        "everything": everything,
        "fresh": step_up.is_fresh(request, now),
        "undo_until": _undo_until(now),
        "approvals": approvals_pending_for(member=member),
        "forgotten_url": reverse("memory:forgotten"),
        "words": WORDS,
    }
    return render(request, "memory/forget_many.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def forget_topic(request: HttpRequest) -> HttpResponse:
    return _forget_many(request, everything=False)


@login_required
@require_http_methods(["GET", "POST"])
def forget_everything(request: HttpRequest) -> HttpResponse:
    return _forget_many(request, everything=True)


@login_required
@require_POST
def change_scope(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    member = _member(request)
    entry = _entry(request, member, entry_id)
    form = ScopeForm(request.POST)
    moves = {move.target: move for move in _moves(entry)}
    if not form.is_valid() or form.cleaned_data["scope_kind"] not in moves:
        # Refused here as the service would refuse it: only the rules' moves are offered.
        messages.error(request, "This memory cannot move there. Nothing was changed.")
        return _back_to(entry.entry_id)
    kind = form.cleaned_data["scope_kind"]
    identifiers: dict[str, str] = {"userId": str(member.public_id)}
    where = SCOPE_LABELS[kind].lower()
    if moves[kind].to_notebook:
        name = form.notebook() or DEFAULT_NOTEBOOK
        identifiers["notebookId"] = name
        where = f"the notebook “{name}”"
    _act(
        request,
        lambda: services.memory_change_scope(
            principal=_principal(request),
            member=member,
            entry_id=entry.entry_id,
            scope_kind=kind,
            scope_identifiers=identifiers,
        ),
        f"Moved to {where}.",
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
    conflict = next(
        (c for c in selectors.pending_conflicts(member=member) if c.id == conflict_id), None
    )
    if conflict is None:
        raise Http404("No such question.")
    form = ConflictAnswerForm(request.POST)
    valid = form.is_valid()
    back = form.cleaned_data.get("back") if valid else request.POST.get("back")
    target = _back_to(conflict.entry_id) if back == "detail" else redirect("memory:home")
    if not valid:
        messages.error(request, "Choose update or keep. Nothing was changed.")
        return target
    answer = form.cleaned_data["answer"]
    _act(
        request,
        lambda: services.memory_conflict_answer(
            principal=_principal(request), member=member, conflict_id=conflict_id, answer=answer
        ),
        "Updated." if answer == "update" else "Kept what Iris already had.",
    )
    return target
