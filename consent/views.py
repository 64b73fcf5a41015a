"""The member's consent page: what each consent unlocks, one button to give or withdraw
it, a confirmation before a withdrawal that deletes memory, and the full history.

Members only; an operator gets 404 (they never act on a member's consent here). Every
change goes through `consent.services`; the page only chooses the legal basis and capture
method a settings page implies (`settings-toggle`, explicit consent for sensitive types).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from consent import ledger, selectors, services
from consent.enums import (
    CONSENT_TYPES,
    SENSITIVE_CATEGORIES,
    CaptureMethod,
    Category,
    ConsentStatus,
    ConsentType,
    LegalBasis,
    OptOutCategory,
    OptOutStatus,
    category_consent_type,
    category_of_consent_type,
)
from consent.ledger import EventKind, LedgerEvent, TrailStep
from consent.policy import BLUEPRINTS, ScopeMode
from consent.terms import current_terms
from governance import vocabulary
from governance.errors import IrisError
from governance.models import User
from governance.pipeline import HeldForApproval
from governance.principal import principal_of
from governance.refusals import refusal_message
from governance.vocabulary import Copy

# The words live in governance.vocabulary, keyed by value; here they are keyed by enum.
GENERAL_COPY: dict[str, Copy] = {ConsentType(k): c for k, c in vocabulary.CONSENT_COPY.items()}

CATEGORY_COPY: dict[Category, tuple[str, str]] = {
    # category: (label, what Iris may remember)
    c: (vocabulary.TOPICS[c].label, vocabulary.TOPICS[c].what)
    for c in sorted(SENSITIVE_CATEGORIES)
}

OPT_OUT_COPY: dict[OptOutCategory, Copy] = {
    OptOutCategory(k): c for k, c in vocabulary.OPT_OUT_COPY.items()
}

CAPTURE_LABELS = vocabulary.CAPTURE_LABELS
STATUS_LABELS = vocabulary.CONSENT_STATUS_LABELS

if set(CATEGORY_COPY) != SENSITIVE_CATEGORIES or set(GENERAL_COPY) != set(ConsentType):
    raise RuntimeError("every consent type needs its copy on the consent page")


def category_copy(category: Category) -> Copy:
    return vocabulary.topic_copy(category.value)


def label_of(kind: str, consent_type: str) -> str:
    if kind == EventKind.OPT_OUT:
        return OPT_OUT_COPY[OptOutCategory(consent_type)].label
    category = category_of_consent_type(consent_type)
    if category is not None:
        return category_copy(category).label
    return GENERAL_COPY[consent_type].label


class ConsentTypeForm(forms.Form):
    consent_type = forms.ChoiceField(choices=[(t, t) for t in CONSENT_TYPES])
    confirmed = forms.BooleanField(required=False)


class OptOutForm(forms.Form):
    category = forms.ChoiceField(choices=[(c.value, c.value) for c in OptOutCategory])


# ---------------------------------------------------------------- views


def slugify_type(key: str) -> str:
    """`category:mental_health` -> `category-mental-health`, for element ids."""
    return key.replace(":", "-").replace("_", "-")


def _member(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User) or user.kind != User.Kind.MEMBER:
        raise Http404("No consent page here.")
    return user


@dataclass(frozen=True)
class ConsentItem:
    consent_type: str
    slug: str
    copy: Copy
    granted: LedgerEvent | None
    cascades: bool


@dataclass(frozen=True)
class OptOutItem:
    category: str
    slug: str
    copy: Copy
    opted_out: LedgerEvent | None


@dataclass(frozen=True)
class HistoryRow:
    occurred_at: datetime
    recorded_at: datetime
    label: str
    change: str
    how: str
    took_effect: bool
    late: bool


def _history(trail: list[TrailStep]) -> list[HistoryRow]:
    rows = []
    for step in reversed(trail):
        e = step.event
        rows.append(
            HistoryRow(
                occurred_at=e.occurred_at,
                recorded_at=e.recorded_at,
                label=label_of(e.kind, e.consent_type),
                change=STATUS_LABELS[e.status],
                how=CAPTURE_LABELS[e.capture_method],
                took_effect=step.took_effect,
                late=(e.recorded_at - e.occurred_at) > ledger.OCCURRED_AT_SKEW,
            )
        )
    return rows


@dataclass(frozen=True)
class TopicGroupItems:
    key: str
    label: str
    explanation: str
    items: list[ConsentItem]


@dataclass(frozen=True)
class ScopeRow:
    label: str
    mode: str
    why: list[str]


def _scope_rows(overview: selectors.ConsentOverview) -> list[ScopeRow]:
    """What each kind of memory does now, and which of the member's choices made it so.

    Built from the blueprints here rather than from the policy's notes: those name the
    member in the third person for the API, a member reads their own switches' names.
    """
    rows = []
    for scope, policy in overview.scopes.items():
        bp = BLUEPRINTS[scope]
        why = [
            f"Needs “{vocabulary.CONSENT_COPY[c].label}”, which is off."
            for c in bp.required_consents
            if c not in overview.granted
        ] + [
            f"You switched off “{vocabulary.OPT_OUT_COPY[o].label}”."
            for o in bp.opt_out_categories
            if o in overview.opted_out
        ]
        if policy.mode == ScopeMode.EPHEMERAL and not why:
            storage = GENERAL_COPY[ConsentType.DATA_STORAGE].label
            why = [f"Kept for the conversation only: “{storage}” is off."]
        rows.append(
            ScopeRow(
                label=vocabulary.POLICY_SCOPE_LABELS[scope.value],
                mode=vocabulary.POLICY_MODE_LABELS[policy.mode.value],
                why=why,
            )
        )
    return rows


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    overview = selectors.consent_overview(tenant_id=member.tenant_id, member=member)

    def item(consent_type: str, copy: Copy) -> ConsentItem:
        return ConsentItem(
            consent_type=consent_type,
            slug=slugify_type(consent_type),
            copy=copy,
            granted=overview.granted.get(consent_type),
            cascades=ledger.would_revoke_cascade(consent_type),
        )

    # Sensitive topics by theme, in the vocabulary's order: close topics (Money, Money
    # worries) are separate consents in the ledger, so they stay separate switches, but
    # side by side in one group with the words that tell them apart.
    groups = [
        TopicGroupItems(
            key,
            group.label,
            group.explanation,
            [
                item(category_consent_type(code), category_copy(Category(code)))
                for code, topic in vocabulary.TOPICS.items()
                if topic.group == key
            ],
        )
        for key, group in vocabulary.TOPIC_GROUPS.items()
        if group.sensitive
    ]
    context = {
        "general": [item(t.value, GENERAL_COPY[t]) for t in ConsentType],
        "topic_groups": groups,
        "opt_outs": [
            OptOutItem(
                c.value, slugify_type(c.value), OPT_OUT_COPY[c], overview.opted_out.get(c.value)
            )
            for c in OptOutCategory
        ],
        "scopes": _scope_rows(overview),
        "history": _history(overview.trail),
        "erased_count": overview.erased_count,
        "terms": current_terms(),
    }
    return render(request, "consent/home.html", context)


def _record(request: HttpRequest, member: User, consent_type: str, status: str) -> bool:
    """Grant or withdraw from the settings page: one path, so both stay equally easy."""
    return _apply(
        request,
        lambda: services.consent_record(
            principal=principal_of(member),
            member=member,
            consent_type=consent_type,
            status=status,
            legal_basis=_basis(consent_type),
            capture_method=CaptureMethod.SETTINGS_TOGGLE,
        ),
    )


@login_required
@require_POST
def grant(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    form = ConsentTypeForm(request.POST)
    if not form.is_valid():
        return _bad_form(request)
    consent_type = form.cleaned_data["consent_type"]
    done = _record(request, member, consent_type, ConsentStatus.GRANTED)
    if done:
        label = label_of(EventKind.CONSENT, consent_type)
        messages.success(request, f"Consent given: {label}.")
    return _back(consent_type)


@login_required
@require_POST
def revoke(request: HttpRequest) -> HttpResponse:
    member = _member(request)
    form = ConsentTypeForm(request.POST)
    if not form.is_valid():
        return _bad_form(request)
    consent_type = form.cleaned_data["consent_type"]
    label = label_of(EventKind.CONSENT, consent_type)
    if ledger.would_revoke_cascade(consent_type) and not form.cleaned_data["confirmed"]:
        granted = selectors.active_consent_types(tenant_id=member.tenant_id, member=member)
        if consent_type in granted:
            category = category_of_consent_type(consent_type)
            copy = category_copy(category) if category else GENERAL_COPY[consent_type]
            return render(
                request,
                "consent/confirm_revoke.html",
                {"consent_type": consent_type, "copy": copy},
            )
    done = _record(request, member, consent_type, ConsentStatus.REVOKED)
    if done:
        messages.success(request, f"Consent withdrawn: {label}.")
    return _back(consent_type)


@login_required
@require_POST
def opt_out(request: HttpRequest) -> HttpResponse:
    return _opt_out(request, OptOutStatus.OPTED_OUT)


@login_required
@require_POST
def opt_in(request: HttpRequest) -> HttpResponse:
    return _opt_out(request, OptOutStatus.OPTED_IN)


def _opt_out(request: HttpRequest, status: OptOutStatus) -> HttpResponse:
    member = _member(request)
    form = OptOutForm(request.POST)
    if not form.is_valid():
        return _bad_form(request)
    category = form.cleaned_data["category"]
    done = _apply(
        request,
        lambda: services.opt_out_record(
            principal=principal_of(member),
            member=member,
            category=category,
            status=status,
            legal_basis=LegalBasis.CONSENT,
            capture_method=CaptureMethod.SETTINGS_TOGGLE,
        ),
    )
    if done:
        label = OPT_OUT_COPY[OptOutCategory(category)].label
        verb = "Switched off" if status == OptOutStatus.OPTED_OUT else "Switched back on"
        messages.success(request, f"{verb}: {label}.")
    return _back(category, prefix="opt-out-")


def _basis(consent_type: str) -> LegalBasis:
    # A settings page is the member's own act: Art. 9(2)(a) explicit consent for the
    # sensitive types, Art. 6(1)(a) consent for the rest.
    if consent_type in ledger.SENSITIVE_CONSENT_TYPES:
        return LegalBasis.EXPLICIT_CONSENT
    return LegalBasis.CONSENT


def _apply(request: HttpRequest, change: Callable[[], object]) -> bool:
    try:
        change()
    except HeldForApproval as exc:
        messages.info(request, exc.detail)
        return False
    except IrisError as exc:
        messages.error(request, refusal_message(exc))
        return False
    return True


def _back(key: str, prefix: str = "consent-") -> HttpResponse:
    """Back to the page, at the item just changed, so keyboard focus continues there."""
    response = redirect("consent:home")
    response["Location"] += f"#{prefix}{slugify_type(key)}"
    response.status_code = 303
    return response


def _bad_form(request: HttpRequest) -> HttpResponse:
    messages.error(request, "That change could not be understood. Nothing was changed.")
    response = redirect("consent:home")
    response.status_code = 303
    return response
