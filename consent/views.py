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
from governance.errors import IrisError
from governance.models import User
from governance.pipeline import HeldForApproval
from governance.principal import principal_of


@dataclass(frozen=True)
class Copy:
    """Plain-English copy for one consent or opt-out."""

    label: str
    unlocks: str
    revoking: str


GENERAL_COPY: dict[str, Copy] = {
    ConsentType.DATA_PROCESSING: Copy(
        "Use what you say to answer you",
        "The assistant may use what you tell it in a conversation to help you. Without it, "
        "Iris keeps nothing at all, not even for the conversation in front of you.",
        "Every kind of memory switches off. Nothing is deleted: delete memories from My "
        "memory, or ask for erasure under Data rights.",
    ),
    ConsentType.DATA_STORAGE: Copy(
        "Remember between conversations",
        "Iris may keep memories after a conversation ends, so the assistant knows you next "
        "time. Without it, memory lasts only as long as the conversation.",
        "Long-term memory switches off and conversations are no longer kept. Nothing is "
        "deleted: you can delete what is already kept from My memory.",
    ),
    ConsentType.SENSITIVE_DATA: Copy(
        "Sensitive data in general",
        "Iris may handle sensitive data at all, which pose memory in Living Scenes needs. "
        "Each sensitive topic below still stays off until you switch it on.",
        "Pose memory switches off. Nothing is deleted.",
    ),
    ConsentType.CROSS_DEVICE: Copy(
        "Continue on your other devices",
        "A conversation you start on one device may carry on another, including sensitive "
        "topics you have switched on.",
        "Conversations still move between devices, but never carry sensitive topics. "
        "Nothing is deleted.",
    ),
    ConsentType.MULTI_ACTOR_SENSITIVE: Copy(
        "Sensitive moments involving other people",
        "Iris may remember sensitive things that happened between you and people you "
        "mention. Those people are kept only as masked references, never as profiles.",
        "Every memory of a sensitive moment involving someone else is deleted, whatever "
        "its topic, with the summaries made from it.",
    ),
}

CATEGORY_COPY: dict[Category, tuple[str, str]] = {
    # category: (label, what Iris may remember)
    Category.PHYSICAL_HEALTH: ("Physical health", "illnesses, injuries, fitness and sleep"),
    Category.MENTAL_HEALTH: ("Mental health", "your mood, stress, and mental health"),
    Category.MEDICAL: ("Medical care", "diagnoses, treatments, medicines and appointments"),
    Category.BIOMETRIC: ("Biometric data", "measurements of your body, such as heart rate"),
    Category.POSE_ALIGNMENT: (
        "Body movement and posture",
        "how you move and hold your body in Living Scenes",
    ),
    Category.SUBSTANCE_USE: ("Alcohol and drugs", "your use of alcohol, drugs or medicines"),
    Category.SEXUAL: ("Sex life", "your sex life"),
    Category.SEXUALITY: ("Sexual orientation", "your sexual orientation"),
    Category.GENDER_IDENTITY: ("Gender identity", "your gender identity"),
    Category.SPIRITUAL: ("Spiritual life", "your spiritual life and practices"),
    Category.RELIGION_USER_REDACTED: ("Religion or belief", "your religion or beliefs"),
    Category.FINANCIAL: ("Money", "your income, spending and accounts"),
    Category.FINANCIAL_DISTRESS: ("Money worries", "debts or money trouble you are facing"),
    Category.LEGAL: ("Legal matters", "contracts, disputes and other legal matters"),
    Category.LEGAL_JEOPARDY: (
        "Legal trouble",
        "situations that could get you into trouble with the law",
    ),
    Category.IMMIGRATION_STATUS: ("Immigration status", "your visa, residence or citizenship"),
    Category.SAFETY: ("Personal safety", "threats to your safety and how you stay safe"),
    Category.ABUSE_HISTORY: ("Experiences of abuse", "abuse you have lived through"),
    Category.RELATIONSHIP_VIOLENCE: (
        "Violence in a relationship",
        "violence or control by a partner or family member",
    ),
}

OPT_OUT_COPY: dict[OptOutCategory, Copy] = {
    OptOutCategory.PERSONALIZATION: Copy(
        "Personalisation",
        "The assistant adapts to your preferences and interests.",
        "Profile and topic memory pause until you switch personalisation back on.",
    ),
    OptOutCategory.SESSION_MEMORY: Copy(
        "Memory within a conversation",
        "The assistant remembers what was said earlier in the same conversation.",
        "Each message is answered on its own.",
    ),
    OptOutCategory.LONG_TERM_MEMORY: Copy(
        "Long-term memory",
        "Iris keeps memories from one conversation to the next.",
        "Long-term memory pauses; what is kept stays until you delete it.",
    ),
    OptOutCategory.CROSS_DEVICE_SYNC: Copy(
        "Sync between devices",
        "A conversation can move from one of your devices to another.",
        "Conversations stay on the device where they started.",
    ),
    OptOutCategory.EMBODIED_MEMORY: Copy(
        "Scene and pose memory",
        "Living Scenes remember the scene and how you moved in it.",
        "Scene and pose memory pause.",
    ),
    OptOutCategory.OPERATOR_COPILOT: Copy(
        "Support assistant memory",
        "Support staff's assistant may remember your past support conversations.",
        "Support starts each conversation without that memory.",
    ),
    OptOutCategory.TENANT_SHARING: Copy(
        "Shared organisation memory",
        "Memory your organisation shares with its members may include what you add.",
        "Nothing you add joins your organisation's shared memory.",
    ),
}

CAPTURE_LABELS: dict[str, str] = {
    CaptureMethod.INLINE_PROMPT: "when the assistant asked",
    CaptureMethod.SETTINGS_TOGGLE: "on this page",
    CaptureMethod.DSAR_IMPORT: "imported with a data-rights request",
    CaptureMethod.OPERATOR_RECORDED: "recorded by staff, with a witness",
}

STATUS_LABELS: dict[str, str] = {
    ConsentStatus.GRANTED: "Given",
    ConsentStatus.REVOKED: "Withdrawn",
    OptOutStatus.OPTED_OUT: "Switched off",
    OptOutStatus.OPTED_IN: "Switched back on",
}

MODE_LABELS: dict[str, str] = {
    ScopeMode.DURABLE: "On, kept between conversations",
    ScopeMode.EPHEMERAL: "On, for the current conversation only",
    ScopeMode.SUPPRESSED: "Off",
}

if set(CATEGORY_COPY) != SENSITIVE_CATEGORIES or set(GENERAL_COPY) != set(ConsentType):
    raise RuntimeError("every consent type needs its copy on the consent page")


def category_copy(category: Category) -> Copy:
    label, what = CATEGORY_COPY[category]
    return Copy(
        label,
        f"Iris may remember {what}, and bring it up only where it is relevant to you.",
        f"Everything Iris remembers about {label.lower()} is deleted, with the summaries "
        "made from it.",
    )


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

    terms = current_terms()
    context = {
        "general": [item(t.value, GENERAL_COPY[t]) for t in ConsentType],
        "categories": [
            item(category_consent_type(c), category_copy(c))
            for c in sorted(SENSITIVE_CATEGORIES, key=lambda c: CATEGORY_COPY[c][0])
        ],
        "opt_outs": [
            OptOutItem(
                c.value, slugify_type(c.value), OPT_OUT_COPY[c], overview.opted_out.get(c.value)
            )
            for c in OptOutCategory
        ],
        "scopes": [
            {
                "label": BLUEPRINTS[scope].label,
                "mode": MODE_LABELS[policy.mode],
                "notes": policy.notes,
            }
            for scope, policy in overview.scopes.items()
        ],
        "history": _history(overview.trail),
        "erased_count": overview.erased_count,
        "terms": terms,
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
        messages.error(request, exc.detail)
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
