"""Effects and approvals: destructive calls wait for the owner, resume governed again,
one approval is one call, approvals expire; the API and the page that answer them."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import views as auth_views
from django.db import transaction
from django.test import Client
from django.urls import include, path
from django.utils import timezone

from governance import approvals, operations
from governance import views as governance_views
from governance.approvals import Resume, approval_decide, approvals_expire, register_resumable
from governance.audit import Actor, audit_record
from governance.effects import run_destructive
from governance.errors import Conflict, Forbidden, NotFound, ValidationFailed
from governance.kernel_models import Approval, SideEffect
from governance.models import AuditEvent, SurfaceClient, User
from governance.pipeline import Denied, Effect, HeldForApproval, Hook, Operation, govern
from governance.principal import Principal, principal_of

PROBLEM = "application/problem+json"
CLEARED = "iris.test.memory_cleared"

# The kernel's routes as the site mounts them (`api/v1/`, `approvals/`), with the chrome the
# pages link to, independent of what other apps' URL modules are doing.
urlpatterns = [
    path("", governance_views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("governance.api_urls")),
    path("approvals/", include("governance.urls_approvals")),
]
handler404 = "iris_site.handlers.not_found"
pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]
pages = pytest.mark.urls(__name__)


# -- a destructive service shaped like memory's ---------------------------------------------


def clear_category(
    *,
    principal: Principal,
    member: User,
    category: str,
    approval_id: str | None = None,
    run_id: str | None = None,
    can_pause: bool = True,
    side_effect_id: str | None = None,
) -> dict[str, int]:
    op = Operation(
        name="memory.clear_category",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        attributes={
            "arguments": {"category": category},
            "approval_id": approval_id,
            "run_id": run_id,
            "can_pause": can_pause,
            "side_effect_id": side_effect_id,
        },
    )
    return run_destructive(op, _clear_in_one_transaction, member, category)


def _clear_in_one_transaction(member: User, category: str) -> dict[str, int]:
    with transaction.atomic(durable=True):
        audit_record(
            actor=Actor("system", "tests"),
            action=CLEARED,
            tenant_id=member.tenant_id,
            reason_code=category,
            subject_ids=[member.public_id],
        )
    return {"cleared": 1}


def _resume_clear_category(call: Resume) -> Any:
    member = User.objects.get(tenant_id=call.principal.tenant_id, public_id=call.member_id)
    attributes = {k: v for k, v in call.attributes.items() if k != "can_pause"}
    return clear_category(
        principal=call.principal, member=member, category=call.arguments["category"], **attributes
    )


def cleared(member: User) -> int:
    return AuditEvent.objects.filter(action=CLEARED, tenant_id=member.tenant_id).count()


@pytest.fixture
def registry(monkeypatch):
    """A private resumable registry holding the fake service (whatever apps registered)."""
    monkeypatch.setattr(operations, "_RESUMABLE", {})
    monkeypatch.setattr(operations, "_UNDO", {})
    register_resumable(
        "memory.clear_category",
        _resume_clear_category,
        action="clear everything Iris remembers about you in one category",
    )
    return operations._RESUMABLE


@pytest.fixture
def surface(surface_token) -> Principal:
    client = SurfaceClient.objects.get()
    return Principal("surface", client.id, client.tenant_id, surface=client.surface)


def hold(surface: Principal, member: User, category: str = "health") -> Approval:
    with pytest.raises(HeldForApproval) as caught:
        clear_category(principal=surface, member=member, category=category)
    return Approval.objects.get(id=caught.value.extra["approvalId"])


# -- the check ---------------------------------------------------------------------------


def test_an_undoable_operation_is_not_called_irreversible(surface, member, registry) -> None:
    register_resumable(
        "memory.clear_category",
        _resume_clear_category,
        action="clear everything Iris remembers about you in one category",
        undo="14 days",
    )
    approval = hold(surface, member)
    assert "cannot be undone" not in approval.card_text
    assert "You can undo it for 14 days afterwards" in approval.card_text
    assert approval.undoable


def test_destructive_call_is_held_and_does_not_run(surface, member, registry) -> None:
    with pytest.raises(HeldForApproval) as caught:
        clear_category(principal=surface, member=member, category="health")
    exc = caught.value
    assert exc.status == 202 and exc.code == "held-for-approval"
    body = exc.problem()
    approval = Approval.objects.get(id=body["approvalId"])
    assert body["card"] == approval.card_text
    assert approval.status == Approval.Status.PENDING
    assert approval.owner == member and approval.tenant_id == member.tenant_id
    assert approval.operation == "memory.clear_category"
    assert approval.arguments == {"category": "health"}
    assert approval.reason_code == "owner-approval-required"
    assert "The assistant app wants to clear everything" in approval.card_text
    assert "“health”" in approval.card_text and "cannot be undone" in approval.card_text
    assert approval.expires_at - approval.created_at == timedelta(hours=24)
    assert cleared(member) == 0
    assert not SideEffect.objects.exists()
    ask = AuditEvent.objects.get(action="iris.governance.decision.ask")
    assert ask.reason_code == "owner-approval-required"
    assert ask.payload["decisions"][-1]["check"] == "owner-approval"
    requested = AuditEvent.objects.get(action="iris.governance.approval.requested")
    assert str(approval.id) in requested.subject_ids


def test_asking_again_for_the_same_call_shows_one_card(surface, member, registry) -> None:
    first = hold(surface, member)
    assert hold(surface, member) == first
    assert hold(surface, member, "finances") != first
    assert Approval.objects.filter(status="pending").count() == 2


def test_approve_resumes_the_call_governed_again(surface, member, registry) -> None:
    approval = hold(surface, member)
    outcome = approval_decide(
        principal=principal_of(member), approval_id=approval.id, decision="approve"
    )
    assert outcome.resume_code == "completed"
    assert outcome.result == {"cleared": 1}
    assert cleared(member) == 1
    approval.refresh_from_db()
    assert approval.status == Approval.Status.COMPLETED
    assert approval.decided_by == member and approval.decided_at is not None
    assert approval.outcome_code == "completed"
    # Governed again: the resumed call left its own allow decision, as the surface.
    allow = AuditEvent.objects.filter(action="iris.governance.decision.allow").last()
    assert allow.actor_kind == "surface"
    reasons = {d["check"]: d["reason"] for d in allow.payload["decisions"]}
    assert reasons["owner-approval"] == "owner-approved"
    actions = list(
        AuditEvent.objects.filter(action__startswith="iris.governance.approval.")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == [
        "iris.governance.approval.requested",
        "iris.governance.approval.approved",
        "iris.governance.approval.consumed",
    ]
    row = SideEffect.objects.get()
    assert row.status == "done" and row.approval_id == approval.id
    assert row.counts == {"cleared": 1}


def test_one_approval_is_one_call(surface, member, registry) -> None:
    approval = hold(surface, member)
    approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    with pytest.raises(HeldForApproval) as caught:
        clear_category(
            principal=surface, member=member, category="health", approval_id=str(approval.id)
        )
    assert caught.value.extra["approvalId"] != str(approval.id)
    assert cleared(member) == 1


def test_an_approval_covers_only_its_own_arguments(surface, member, registry) -> None:
    registry.clear()  # approved, but left for the caller to retry
    approval = hold(surface, member, "health")
    approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    with pytest.raises(HeldForApproval):
        clear_category(
            principal=surface, member=member, category="finances", approval_id=str(approval.id)
        )
    assert cleared(member) == 0
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED


def test_another_members_approval_is_not_accepted(surface, member, other_member, registry) -> None:
    registry.clear()
    theirs = hold(surface, other_member, "health")
    approval_decide(principal=principal_of(other_member), approval_id=theirs.id, decision="approve")
    with pytest.raises(HeldForApproval):
        clear_category(
            principal=surface, member=member, category="health", approval_id=str(theirs.id)
        )
    assert cleared(member) == 0


def test_approved_without_a_resumable_lets_the_caller_retry_once(surface, member, registry) -> None:
    registry.clear()
    approval = hold(surface, member)
    outcome = approval_decide(
        principal=principal_of(member), approval_id=approval.id, decision="approve"
    )
    assert outcome.resume_code == "not-resumable"
    assert cleared(member) == 0
    clear_category(principal=surface, member=member, category="health", approval_id=approval.id)
    assert cleared(member) == 1
    approval.refresh_from_db()
    assert approval.status == Approval.Status.COMPLETED


def test_deny_changes_nothing(surface, member, registry) -> None:
    approval = hold(surface, member)
    outcome = approval_decide(
        principal=principal_of(member), approval_id=approval.id, decision="deny"
    )
    assert outcome.approval.status == Approval.Status.DENIED and outcome.resume_code == ""
    assert cleared(member) == 0
    with pytest.raises(HeldForApproval):
        clear_category(
            principal=surface, member=member, category="health", approval_id=str(approval.id)
        )
    assert AuditEvent.objects.filter(action="iris.governance.approval.denied").count() == 1


def test_a_revoked_requester_does_not_resume(surface, member, registry) -> None:
    approval = hold(surface, member)
    SurfaceClient.objects.update(revoked_at=timezone.now())
    outcome = approval_decide(
        principal=principal_of(member), approval_id=approval.id, decision="approve"
    )
    assert outcome.resume_code == "requester-revoked"
    assert cleared(member) == 0


def test_a_lane_that_cannot_pause_is_refused_not_queued(surface, member, registry) -> None:
    with pytest.raises(Denied) as caught:
        clear_category(principal=surface, member=member, category="health", can_pause=False)
    assert caught.value.code == "cannot-pause"
    assert not Approval.objects.exists()
    assert cleared(member) == 0


def test_the_member_acting_themself_is_asked_too(member, registry) -> None:
    approval = hold(principal_of(member), member)
    assert approval.card_text.startswith("You want to clear")
    approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    assert cleared(member) == 1


def test_iris_own_jobs_are_not_held(member, registry) -> None:
    job = Principal.system("retention", member.tenant_id)
    clear_category(principal=job, member=member, category="health")
    assert cleared(member) == 1
    assert not Approval.objects.exists()


def test_arguments_that_look_like_content_are_refused(surface, member) -> None:
    op = Operation(
        name="memory.clear_category",
        effect=Effect.DESTRUCTIVE,
        principal=surface,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        attributes={"arguments": {"text": "my bank password is hunter2"}},
    )
    with pytest.raises(Denied) as caught:
        govern(Hook.PRE_DESTRUCTIVE, op)
    assert caught.value.code == "side-effect-arguments-invalid"
    assert not Approval.objects.exists()


# -- deciding ----------------------------------------------------------------------------


def test_deciding_twice_is_a_conflict_and_changes_nothing(surface, member, registry) -> None:
    approval = hold(surface, member)
    approval_decide(principal=principal_of(member), approval_id=approval.id, decision="deny")
    events = AuditEvent.objects.count()
    with pytest.raises(Conflict) as caught:
        approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    assert caught.value.status == 409 and caught.value.code == "approval-already-decided"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.DENIED
    assert AuditEvent.objects.count() == events and cleared(member) == 0


@pytest.mark.parametrize("decision", ["yes", "", "APPROVE", None])
def test_unknown_decision_is_refused(surface, member, registry, decision) -> None:
    approval = hold(surface, member)
    with pytest.raises(ValidationFailed) as caught:
        approval_decide(principal=principal_of(member), approval_id=approval.id, decision=decision)
    assert caught.value.field == "decision"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_only_the_owner_decides(
    surface, member, other_member, foreign_member, make_operator, registry
) -> None:
    approval = hold(surface, member)
    for stranger in (other_member, foreign_member):
        with pytest.raises(NotFound):
            approval_decide(
                principal=principal_of(stranger), approval_id=approval.id, decision="approve"
            )
    with pytest.raises(Forbidden):
        approval_decide(principal=surface, approval_id=approval.id, decision="approve")
    with pytest.raises(Forbidden):
        approval_decide(
            principal=principal_of(make_operator("admin")),
            approval_id=approval.id,
            decision="approve",
        )
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and cleared(member) == 0


@pytest.mark.parametrize("hook", ["pre_nothing", "PRE_WRITE", "", "pre-write"])
def test_an_unknown_hook_is_refused_and_records_nothing(member, hook) -> None:
    op = Operation("memory.write", Effect.WRITE, principal_of(member), member.tenant_id)
    events = AuditEvent.objects.count()
    with pytest.raises(ValidationFailed) as caught:
        govern(hook, op)
    assert caught.value.status == 400 and caught.value.code == "unknown-hook"
    assert caught.value.field == "hook" and "pre_write" in caught.value.allowed
    assert AuditEvent.objects.count() == events


# -- expiry ------------------------------------------------------------------------------


def test_unanswered_approvals_expire(surface, member, registry) -> None:
    approval = hold(surface, member)
    assert approvals_expire(now=timezone.now() + timedelta(hours=23)) == 0
    later = timezone.now() + timedelta(hours=25)
    assert approvals_expire(now=later) == 1
    assert approvals_expire(now=later) == 0  # idempotent
    approval.refresh_from_db()
    assert approval.status == Approval.Status.EXPIRED
    assert AuditEvent.objects.filter(action="iris.governance.approval.expired").count() == 1
    with pytest.raises(Conflict):
        approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    assert approvals.approvals_pending_for(member=member) == []


def test_an_approval_past_its_time_cannot_be_decided_before_the_sweep(
    surface, member, registry
) -> None:
    approval = hold(surface, member)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(1))
    with pytest.raises(Conflict) as caught:
        approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    assert caught.value.code == "approval-expired"
    assert cleared(member) == 0


def test_an_approved_but_unused_approval_expires_too(surface, member, registry) -> None:
    registry.clear()
    approval = hold(surface, member)
    approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    assert approvals_expire(now=timezone.now() + timedelta(hours=25)) == 1
    with pytest.raises(HeldForApproval):
        clear_category(
            principal=surface, member=member, category="health", approval_id=str(approval.id)
        )


def test_the_expiry_task_runs(surface, member, registry) -> None:
    approval = hold(surface, member)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(1))
    assert approvals.approvals_expire_task.apply().get() == 1


# -- the API -----------------------------------------------------------------------------

URL = "/api/v1/approvals"


def decide_url(approval_id: object) -> str:
    return f"{URL}/{approval_id}/decide"


def test_member_lists_their_own_pending_approvals(
    surface, member, other_member, member_api, registry
) -> None:
    mine = hold(surface, member)
    hold(surface, other_member)
    response = member_api.get(URL)
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["id"] for r in results] == [str(mine.id)]
    assert results[0]["card"] == mine.card_text
    assert results[0]["operation"] == "memory.clear_category"
    assert results[0]["status"] == "pending" and results[0]["reasonCode"]


def test_surface_lists_a_members_approvals(
    surface, member, surface_api, foreign_member, registry
) -> None:
    mine = hold(surface, member)
    response = surface_api.get(URL, {"userId": str(member.public_id)})
    assert [r["id"] for r in response.json()["results"]] == [str(mine.id)]
    missing = surface_api.get(URL)
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "userId"
    assert surface_api.get(URL, {"userId": str(foreign_member.public_id)}).status_code == 404
    assert surface_api.get(URL, {"userId": "not-a-uuid"}).status_code == 400


def test_list_refuses_anonymous_and_operators(api, make_operator) -> None:
    assert api.get(URL).status_code == 401
    api.force_login(make_operator("support"))
    response = api.get(URL)
    assert response.status_code == 403 and response["Content-Type"] == PROBLEM


def test_list_query_count_does_not_grow(
    surface, member, member_api, registry, django_assert_max_num_queries
) -> None:
    for category in ("health", "finances", "politics", "religion"):
        hold(surface, member, category)
    with django_assert_max_num_queries(6):
        response = member_api.get(URL)
    assert len(response.json()["results"]) == 4


def test_owner_approves_over_the_api(surface, member, member_api, registry) -> None:
    approval = hold(surface, member)
    response = member_api.post(decide_url(approval.id), {"decision": "approve"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["approval"]["status"] == "completed"
    assert body["resume"] == {"code": "completed"}
    assert cleared(member) == 1


def test_owner_denies_over_the_api(surface, member, member_api, registry) -> None:
    approval = hold(surface, member)
    response = member_api.post(decide_url(approval.id), {"decision": "deny"}, format="json")
    assert response.status_code == 200
    assert response.json()["approval"]["status"] == "denied"
    assert response.json()["resume"] is None
    assert cleared(member) == 0


def test_api_decide_bad_input_and_strangers(
    surface,
    member,
    other_member,
    foreign_member,
    member_api,
    surface_api,
    api,
    make_operator,
    registry,
):
    approval = hold(surface, member)
    url = decide_url(approval.id)
    admin = make_operator("admin")
    operator = Client()
    operator.force_login(admin)  # before counting: an operator's sign-in is audited
    events = AuditEvent.objects.count()

    bad = member_api.post(url, {"decision": "maybe"}, format="json")
    assert bad.status_code == 400 and bad["Content-Type"] == PROBLEM
    assert bad.json()["errors"][0]["field"] == "decision"
    assert member_api.post(url, {}, format="json").status_code == 400
    assert api.post(url, {"decision": "approve"}, format="json").status_code == 401
    assert surface_api.post(url, {"decision": "approve"}, format="json").status_code == 403
    for stranger in (other_member, foreign_member):
        client = Client()
        client.force_login(stranger)
        answer = client.post(url, {"decision": "approve"}, content_type="application/json")
        assert answer.status_code == 404 and answer["Content-Type"] == PROBLEM
    assert (
        operator.post(url, {"decision": "approve"}, content_type="application/json").status_code
        == 403
    )
    assert (
        member_api.post(
            decide_url(uuid.uuid4()), {"decision": "approve"}, format="json"
        ).status_code
        == 404
    )
    assert (
        member_api.post(f"{URL}/nope/decide", {"decision": "approve"}, format="json").status_code
        == 404
    )

    approval.refresh_from_db()
    assert approval.status == "pending" and cleared(member) == 0
    assert AuditEvent.objects.count() == events

    assert member_api.post(url, {"decision": "deny"}, format="json").status_code == 200
    twice = member_api.post(url, {"decision": "approve"}, format="json")
    assert twice.status_code == 409 and twice.json()["code"] == "approval-already-decided"
    approval.refresh_from_db()
    assert approval.status == "denied" and cleared(member) == 0


def test_decide_is_idempotent_with_a_key(surface, member, member_api, registry) -> None:
    approval = hold(surface, member)
    headers = {"HTTP_IDEMPOTENCY_KEY": "decide-1"}
    first = member_api.post(
        decide_url(approval.id), {"decision": "approve"}, format="json", **headers
    )
    again = member_api.post(
        decide_url(approval.id), {"decision": "approve"}, format="json", **headers
    )
    assert first.status_code == again.status_code == 200
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert cleared(member) == 1


def test_held_call_over_http_would_answer_202_with_the_approval_id(
    surface, member, registry
) -> None:
    from governance.errors import problem_exception_handler

    with pytest.raises(HeldForApproval) as caught:
        clear_category(principal=surface, member=member, category="health")
    response = problem_exception_handler(caught.value, {})
    assert response.status_code == 202
    assert response.data["code"] == "held-for-approval"
    assert Approval.objects.filter(id=response.data["approvalId"]).exists()


# -- the page ----------------------------------------------------------------------------


@pages
def test_page_shows_the_members_cards(client, surface, member, other_member, registry) -> None:
    mine = hold(surface, member)
    theirs = hold(surface, other_member, "finances")
    client.force_login(member)
    response = client.get("/approvals/")
    assert response.status_code == 200
    html = response.content.decode()
    assert mine.card_text.replace("“", "&ldquo;")[:20] in html or mine.card_text[:20] in html
    assert f"/approvals/{mine.id}/decide" in html
    assert str(theirs.id) not in html
    assert "csrfmiddlewaretoken" in html
    assert 'name="decision" value="approve"' in html and 'name="decision" value="deny"' in html


@pages
def test_page_with_nothing_waiting(client, member) -> None:
    client.force_login(member)
    assert "Nothing is waiting for your approval." in client.get("/approvals/").content.decode()


@pages
def test_page_refuses_anonymous_and_operators(client, make_operator) -> None:
    response = client.get("/approvals/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(make_operator("support"))
    assert client.get("/approvals/").status_code == 403


@pages
def test_page_approve_runs_the_call_and_says_so(client, surface, member, registry) -> None:
    approval = hold(surface, member)
    client.force_login(member)
    response = client.post(f"/approvals/{approval.id}/decide", {"decision": "approve"}, follow=True)
    assert response.redirect_chain[-1][0] == "/approvals/"
    assert "Approved. The change was made." in response.content.decode()
    assert cleared(member) == 1


@pages
def test_page_deny_and_return_to_a_safe_next(client, surface, member, registry) -> None:
    approval = hold(surface, member)
    client.force_login(member)
    response = client.post(
        f"/approvals/{approval.id}/decide", {"decision": "deny", "next": "https://evil.example/"}
    )
    assert response.status_code == 302 and response["Location"] == "/approvals/"
    other = hold(surface, member, "finances")
    response = client.post(f"/approvals/{other.id}/decide", {"decision": "deny", "next": "/"})
    assert response["Location"] == "/"
    assert cleared(member) == 0


@pages
def test_page_strangers_get_404_and_bad_input_changes_nothing(
    client, surface, member, other_member, registry
) -> None:
    approval = hold(surface, member)
    client.force_login(other_member)
    assert (
        client.post(f"/approvals/{approval.id}/decide", {"decision": "approve"}).status_code == 404
    )
    client.force_login(member)
    response = client.post(f"/approvals/{approval.id}/decide", {"decision": "sure"}, follow=True)
    assert "Choose Approve or Deny." in response.content.decode()
    assert client.get(f"/approvals/{approval.id}/decide").status_code == 405
    approval.refresh_from_db()
    assert approval.status == "pending" and cleared(member) == 0


@pages
def test_page_post_needs_the_csrf_token(surface, member, registry) -> None:
    approval = hold(surface, member)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    assert (
        client.post(f"/approvals/{approval.id}/decide", {"decision": "approve"}).status_code == 403
    )
    approval.refresh_from_db()
    assert approval.status == "pending"


@pages
def test_page_query_count_does_not_grow(
    client, surface, member, registry, django_assert_max_num_queries
) -> None:
    for category in ("health", "finances", "politics"):
        hold(surface, member, category)
    client.force_login(member)
    with django_assert_max_num_queries(8):
        response = client.get("/approvals/")
    assert response.content.decode().count('value="approve"') == 3
