"""Taint: once a run read external content, a correction, forget or restore in that run
waits for the owner with a card that says why; only those three; the taint survives a
resume after approval; one approval is not consent to the next write; a lane that cannot
pause is refused. Plus the run-steps endpoint and the policy file's fallbacks."""

from __future__ import annotations

import hashlib
import logging
import uuid
from typing import Any

import pytest
from django.contrib.auth import views as auth_views
from django.db import transaction
from django.urls import include, path

from governance import operations
from governance.approvals import Resume, approval_decide, register_resumable
from governance.audit import audit_record
from governance.kernel_models import Approval, Run, RunStep
from governance.models import AuditEvent, SurfaceClient, User
from governance.pipeline import Denied, Effect, HeldForApproval, Hook, Operation, govern
from governance.principal import Principal, principal_of
from governance.runs import (
    DEFAULT_TAINT_OPERATIONS,
    TaintHold,
    load_taint_policy,
    parse_taint_policy,
    run_is_tainted,
    run_step_record,
)

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("api/v1/", include("governance.api_urls")),
]
handler404 = "iris_site.handlers.not_found"
pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

CARD = "Iris read text from outside earlier in this run and now wants to make this change"
CORRECTED = "iris.test.memory_corrected"
ENTRY = "7d1c1f0e-0000-4000-8000-000000000001"

# The correction text a held call waits with. Memory keeps such drafts in its own table
# (erased with the member); approvals store only the draft's fingerprint.
DRAFTS: dict[str, str] = {}


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def memory_correct(
    *,
    principal: Principal,
    member: User,
    entry_id: str,
    body: str,
    run_id: str | None = None,
    approval_id: str | None = None,
    can_pause: bool = True,
) -> str:
    DRAFTS[fingerprint(body)] = body
    op = Operation(
        name="memory.correct",
        effect=Effect.WRITE,
        principal=principal,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        subject_ids=(entry_id,),
        attributes={
            "arguments": {"entryId": entry_id, "bodyFingerprint": fingerprint(body)},
            "run_id": run_id,
            "approval_id": approval_id,
            "can_pause": can_pause,
        },
        text=body,
    )
    govern(Hook.PRE_WRITE, op)
    with transaction.atomic(durable=True):
        audit_record(
            actor=principal.actor,
            action=CORRECTED,
            tenant_id=member.tenant_id,
            subject_ids=[entry_id],
            payload={"fingerprint": fingerprint(body)},
        )
    return fingerprint(body)


def _resume_correct(call: Resume) -> Any:
    member = User.objects.get(tenant_id=call.principal.tenant_id, public_id=call.member_id)
    return memory_correct(
        principal=call.principal,
        member=member,
        entry_id=call.arguments["entryId"],
        body=DRAFTS[call.arguments["bodyFingerprint"]],
        run_id=call.attributes["run_id"],
        approval_id=call.attributes["approval_id"],
    )


def corrections() -> int:
    return AuditEvent.objects.filter(action=CORRECTED).count()


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(operations, "_RESUMABLE", {})
    monkeypatch.setattr(operations, "_UNDO", {})
    register_resumable("memory.correct", _resume_correct)


@pytest.fixture
def surface(surface_token) -> Principal:
    client = SurfaceClient.objects.get()
    return Principal("surface", client.id, client.tenant_id, surface=client.surface)


@pytest.fixture
def tainted_run(surface) -> str:
    run_id = str(uuid.uuid4())
    run_step_record(
        principal=surface, run_id=run_id, tool="memory_recall", read_external_content=False
    )
    run_step_record(
        principal=surface, run_id=run_id, tool="web_fetch", read_external_content=True, source="web"
    )
    return run_id


@pytest.fixture
def clean_run(surface) -> str:
    run_id = str(uuid.uuid4())
    run_step_record(
        principal=surface, run_id=run_id, tool="calendar_read", read_external_content=False
    )
    return run_id


def op_named(name: str, effect: Effect, surface: Principal, member: User, run_id: str) -> Operation:
    return Operation(
        name=name,
        effect=effect,
        principal=surface,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        subject_ids=(ENTRY,),
        attributes={"run_id": run_id},
    )


# -- which calls are held ----------------------------------------------------------------------

HELD = ["memory.correct", "memory.forget", "memory.restore"]
NOT_HELD = [
    ("memory.write", Effect.WRITE),
    ("memory.confirm", Effect.WRITE),
    ("memory.pause", Effect.WRITE),
    ("memory.resume", Effect.WRITE),
    ("memory.scope", Effect.WRITE),
    ("memory.recall", Effect.READ),
    ("consent.record", Effect.WRITE),
    ("memory.clear_all", Effect.DESTRUCTIVE),
    ("memory.hard_delete", Effect.DESTRUCTIVE),
    ("memory.correct_all", Effect.WRITE),
    ("memory.correct.all", Effect.WRITE),
]


def test_default_policy_is_the_three_memory_writes() -> None:
    assert DEFAULT_TAINT_OPERATIONS == {"memory_correct", "memory_forget", "memory_restore"}
    assert load_taint_policy().operations == DEFAULT_TAINT_OPERATIONS  # the shipped file


@pytest.mark.parametrize("name", HELD)
@pytest.mark.parametrize("hook", [Hook.PRE_WRITE, Hook.PRE_DESTRUCTIVE])
def test_taint_holds_the_three_writes(surface, member, tainted_run, name, hook) -> None:
    decision = TaintHold().evaluate(
        hook, op_named(name, Effect.WRITE, surface, member, tainted_run)
    )
    assert decision is not None and decision.verdict == "ask"
    assert decision.reason_code == "tainted-run"
    assert decision.detail.startswith(CARD)
    assert Approval.objects.get(id=decision.extra["approvalId"]).operation == name


@pytest.mark.parametrize(("name", "effect"), NOT_HELD)
def test_taint_holds_nothing_else(surface, member, tainted_run, name, effect) -> None:
    op = op_named(name, effect, surface, member, tainted_run)
    for hook in (Hook.PRE_WRITE, Hook.PRE_DESTRUCTIVE):
        assert TaintHold().evaluate(hook, op) is None
    assert not Approval.objects.exists()


@pytest.mark.parametrize("name", HELD)
def test_the_same_call_in_a_clean_run_or_no_run_is_unchanged(
    surface, member, clean_run, name
) -> None:
    assert (
        TaintHold().evaluate(
            Hook.PRE_WRITE, op_named(name, Effect.WRITE, surface, member, clean_run)
        )
        is None
    )
    never_reported = str(uuid.uuid4())
    assert (
        TaintHold().evaluate(
            Hook.PRE_WRITE, op_named(name, Effect.WRITE, surface, member, never_reported)
        )
        is None
    )
    op = Operation(name, Effect.WRITE, surface, member.tenant_id, member.public_id)
    assert TaintHold().evaluate(Hook.PRE_WRITE, op) is None


def test_a_clean_run_correction_runs_straight_away(surface, member, clean_run, registry) -> None:
    memory_correct(
        principal=surface, member=member, entry_id=ENTRY, body="likes tea", run_id=clean_run
    )
    assert corrections() == 1 and not Approval.objects.exists()


def test_a_malformed_run_id_is_refused(surface, member) -> None:
    with pytest.raises(Denied) as caught:
        memory_correct(principal=surface, member=member, entry_id=ENTRY, body="x", run_id="run-1")
    assert caught.value.code == "run-id-invalid"
    assert corrections() == 0


# -- the held call, its approval and its resumption ---------------------------------------------


def test_tainted_correction_is_held_with_a_card_that_says_why(
    surface, member, tainted_run, registry
) -> None:
    with pytest.raises(HeldForApproval) as caught:
        memory_correct(
            principal=surface,
            member=member,
            entry_id=ENTRY,
            body="likes coffee",
            run_id=tainted_run,
        )
    assert corrections() == 0
    approval = Approval.objects.get(id=caught.value.extra["approvalId"])
    assert approval.reason_code == "tainted-run"
    assert approval.card_text.startswith(CARD) and "correct a memory" in approval.card_text
    assert "coffee" not in approval.card_text and "coffee" not in str(approval.arguments)
    assert approval.run_id == uuid.UUID(tainted_run)
    ask = AuditEvent.objects.get(action="iris.governance.decision.ask")
    assert ask.payload["decisions"][-1] == {
        "check": "taint-hold",
        "verdict": "ask",
        "reason": "tainted-run",
    }


def test_the_taint_survives_the_resume_and_one_approval_is_one_write(
    surface, member, tainted_run, registry
) -> None:
    with pytest.raises(HeldForApproval) as caught:
        memory_correct(
            principal=surface,
            member=member,
            entry_id=ENTRY,
            body="likes coffee",
            run_id=tainted_run,
        )
    approval_id = caught.value.extra["approvalId"]
    outcome = approval_decide(
        principal=principal_of(member), approval_id=approval_id, decision="approve"
    )
    assert outcome.resume_code == "completed" and corrections() == 1

    # The resumed call ran in the same run, still tainted, accepted on the approval.
    assert run_is_tainted(
        tenant_id=member.tenant_id, surface="assistant", run_id=uuid.UUID(tainted_run)
    )
    allow = AuditEvent.objects.filter(action="iris.governance.decision.allow").last()
    assert {"check": "taint-hold", "verdict": "allow", "reason": "owner-approved"} in allow.payload[
        "decisions"
    ]
    assert Approval.objects.get(id=approval_id).status == "completed"

    # The next write of the run, and the same write again, each wait for a new approval.
    for body in ("likes cocoa", "likes coffee"):
        with pytest.raises(HeldForApproval) as again:
            memory_correct(
                principal=surface,
                member=member,
                entry_id=ENTRY,
                body=body,
                run_id=tainted_run,
                approval_id=approval_id,
            )
        assert again.value.extra["approvalId"] != approval_id
    assert corrections() == 1


def test_a_lane_that_cannot_pause_is_refused(surface, member, tainted_run) -> None:
    with pytest.raises(Denied) as caught:
        memory_correct(
            principal=surface,
            member=member,
            entry_id=ENTRY,
            body="likes coffee",
            run_id=tainted_run,
            can_pause=False,
        )
    assert caught.value.code == "taint-cannot-pause"
    assert corrections() == 0 and not Approval.objects.exists()
    deny = AuditEvent.objects.get(action="iris.governance.decision.deny")
    assert deny.reason_code == "taint-cannot-pause"


def test_a_tainted_destructive_call_needs_one_approval_spent_once(
    surface, member, tainted_run
) -> None:
    op = Operation(
        name="memory.forget",
        effect=Effect.DESTRUCTIVE,
        principal=surface,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        subject_ids=(ENTRY,),
        attributes={"run_id": tainted_run},
    )
    with pytest.raises(HeldForApproval) as caught:
        govern(Hook.PRE_DESTRUCTIVE, op)
    approval = Approval.objects.get(id=caught.value.extra["approvalId"])
    assert approval.reason_code == "tainted-run"  # the card says why: the outside text
    approval_decide(principal=principal_of(member), approval_id=approval.id, decision="approve")
    approved = Operation(
        **{**op.__dict__, "attributes": {"run_id": tainted_run, "approval_id": str(approval.id)}}
    )
    govern(Hook.PRE_DESTRUCTIVE, approved)
    assert Approval.objects.get(id=approval.id).status == "completed"
    assert AuditEvent.objects.filter(action="iris.governance.approval.consumed").count() == 1
    with pytest.raises(HeldForApproval):
        govern(Hook.PRE_DESTRUCTIVE, approved)


def test_taint_is_per_tenant(
    surface, member, foreign_surface_token, foreign_member, tainted_run
) -> None:
    foreign_client = SurfaceClient.objects.exclude(tenant_id=member.tenant_id).get()
    foreign = Principal("surface", foreign_client.id, foreign_client.tenant_id, surface="assistant")
    # The same run id in another tenant is another run, and it is clean.
    assert not run_is_tainted(
        tenant_id=foreign_member.tenant_id, surface="assistant", run_id=uuid.UUID(tainted_run)
    )
    memory_correct(
        principal=foreign, member=foreign_member, entry_id=ENTRY, body="x", run_id=tainted_run
    )
    assert corrections() == 1


# -- the policy file ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "approval_when_tainted: [memory_forget]\n",
        "# comment\napproval_when_tainted:\n  - memory_forget\n",
    ],
)
def test_a_policy_file_names_the_held_operations(
    raw, tmp_path, settings, surface, member, tainted_run
) -> None:
    policy = tmp_path / "taint-policy.yaml"
    policy.write_text(raw)
    settings.IRIS_TAINT_POLICY_PATH = policy
    assert load_taint_policy().operations == {"memory_forget"}
    assert load_taint_policy().from_file
    correct = op_named("memory.correct", Effect.WRITE, surface, member, tainted_run)
    forget = op_named("memory.forget", Effect.WRITE, surface, member, tainted_run)
    assert TaintHold().evaluate(Hook.PRE_WRITE, correct) is None
    assert TaintHold().evaluate(Hook.PRE_WRITE, forget).verdict == "ask"


CANARY = "canary-7f3a-do-not-log"


@pytest.mark.parametrize(
    "raw",
    [
        f"approval_when_tainted: [memory_*]  # {CANARY}\n",
        f"approval_when_tainted: ['memory_?orrect', {CANARY}]\n",
        f"approval_when_tainted: {CANARY}\n",
        "approval_when_tainted: []\n",
        f"approval_when_tainted: [1, 2]\nnote: {CANARY}\n",
        f"held: [memory_forget, {CANARY}]\n",
        f"- memory_forget\n- {CANARY}\n",
        f"approval_when_tainted: [memory_forget\n  {CANARY}: [\n",
        f"approval_when_tainted: ['Memory.Forget', {CANARY}]\n",
        "",
    ],
)
def test_a_malformed_policy_falls_back_to_the_three_and_logs_no_content(
    raw, tmp_path, settings, caplog
) -> None:
    policy = tmp_path / "taint-policy.yaml"
    policy.write_text(raw)
    settings.IRIS_TAINT_POLICY_PATH = policy
    with caplog.at_level(logging.WARNING, logger="governance.runs"):
        loaded = load_taint_policy()
    assert loaded.operations == DEFAULT_TAINT_OPERATIONS
    assert not loaded.from_file and loaded.problem == "malformed"
    assert "malformed" in caplog.text
    assert CANARY not in caplog.text


def test_a_missing_policy_falls_back_to_the_three(tmp_path, settings, caplog) -> None:
    settings.IRIS_TAINT_POLICY_PATH = tmp_path / "nowhere.yaml"
    with caplog.at_level(logging.WARNING, logger="governance.runs"):
        loaded = load_taint_policy()
    assert loaded.operations == DEFAULT_TAINT_OPERATIONS and loaded.problem == "missing"
    assert "missing" in caplog.text


def test_parse_taint_policy_refuses_wildcards() -> None:
    for bad in ("memory_*", "*", "memory.correct", "memory_[cf]orget"):
        with pytest.raises(ValueError):
            parse_taint_policy(f"approval_when_tainted: ['{bad}']")


# -- POST /api/v1/runs/{runId}/steps -------------------------------------------------------------


def steps_url(run_id: object) -> str:
    return f"/api/v1/runs/{run_id}/steps"


def test_a_surface_reports_steps_and_the_run_becomes_tainted(surface_api, tenant) -> None:
    run_id = uuid.uuid4()
    first = surface_api.post(
        steps_url(run_id), {"tool": "calendar_read", "readExternalContent": False}, format="json"
    )
    assert first.status_code == 201
    assert first.json() == {
        "runId": str(run_id),
        "seq": 1,
        "tool": "calendar_read",
        "readExternalContent": False,
        "tainted": False,
    }
    second = surface_api.post(
        steps_url(run_id),
        {"tool": "web_fetch", "readExternalContent": True, "source": "skill:web-fetch"},
        format="json",
    )
    assert second.status_code == 201
    assert second.json()["seq"] == 2 and second.json()["tainted"] is True
    run = Run.objects.get(tenant=tenant, run_id=run_id)
    assert run.step_count == 2 and run.surface == "assistant"
    assert list(run.steps.order_by("seq").values_list("tool", "read_external_content")) == [
        ("calendar_read", False),
        ("web_fetch", True),
    ]
    events = AuditEvent.objects.filter(action="iris.governance.run.step_recorded").order_by("seq")
    assert [e.reason_code for e in events] == ["", "external-content"]
    assert all("skill:web-fetch" not in str(e.payload) for e in events)


def test_steps_are_idempotent_with_a_key(surface_api) -> None:
    run_id = uuid.uuid4()
    body = {"tool": "web_fetch", "readExternalContent": True}
    headers = {"HTTP_IDEMPOTENCY_KEY": "step-1"}
    first = surface_api.post(steps_url(run_id), body, format="json", **headers)
    again = surface_api.post(steps_url(run_id), body, format="json", **headers)
    assert first.json() == again.json() and again["Idempotent-Replayed"] == "true"
    assert RunStep.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"readExternalContent": True}, "tool"),
        ({"tool": "", "readExternalContent": True}, "tool"),
        ({"tool": "web fetch; rm", "readExternalContent": True}, "tool"),
        ({"tool": "x" * 65, "readExternalContent": True}, "tool"),
        ({"tool": 42, "readExternalContent": True}, "tool"),
        ({"tool": "web_fetch"}, "readExternalContent"),
        ({"tool": "web_fetch", "readExternalContent": "yes"}, "readExternalContent"),
        ({"tool": "web_fetch", "readExternalContent": 1}, "readExternalContent"),
        ({"tool": "web_fetch", "readExternalContent": None}, "readExternalContent"),
        ({"tool": "web_fetch", "readExternalContent": True, "source": "s" * 201}, "source"),
    ],
)
def test_malformed_steps_are_refused_and_change_nothing(surface_api, body, field) -> None:
    events = AuditEvent.objects.count()
    response = surface_api.post(steps_url(uuid.uuid4()), body, format="json")
    assert response.status_code == 400, response.json()
    assert response["Content-Type"] == "application/problem+json"
    assert field in {e["field"] for e in response.json()["errors"]}
    assert not RunStep.objects.exists() and not Run.objects.exists()
    assert AuditEvent.objects.count() == events


@pytest.mark.parametrize("run_id", ["run-1", "123", "7d1c1f0e-0000-4000-8000-00000000000z"])
def test_a_malformed_run_id_is_a_400_naming_it(surface_api, run_id) -> None:
    response = surface_api.post(
        steps_url(run_id), {"tool": "web_fetch", "readExternalContent": True}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "runId"
    assert not Run.objects.exists()


def test_a_body_that_is_not_json_is_a_400(surface_api) -> None:
    response = surface_api.post(steps_url(uuid.uuid4()), "{nope", content_type="application/json")
    assert response.status_code == 400 and not Run.objects.exists()


def test_only_surfaces_report_steps(api, member_api, make_operator) -> None:
    body = {"tool": "web_fetch", "readExternalContent": True}
    assert api.post(steps_url(uuid.uuid4()), body, format="json").status_code == 401
    assert member_api.post(steps_url(uuid.uuid4()), body, format="json").status_code == 403
    api.force_login(make_operator("admin"))
    assert api.post(steps_url(uuid.uuid4()), body, format="json").status_code == 403
    assert not Run.objects.exists()


def test_the_service_refuses_non_surfaces(member) -> None:
    from governance.errors import Forbidden

    with pytest.raises(Forbidden):
        run_step_record(
            principal=principal_of(member),
            run_id=uuid.uuid4(),
            tool="web_fetch",
            read_external_content=True,
        )


def test_old_runs_are_deleted_with_their_steps(surface, tainted_run, clean_run) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from governance.runs import runs_expire, runs_expire_task

    assert runs_expire() == 0
    Run.objects.filter(run_id=tainted_run).update(created_at=timezone.now() - timedelta(days=8))
    assert runs_expire() == 1
    assert list(Run.objects.values_list("run_id", flat=True)) == [uuid.UUID(clean_run)]
    assert not RunStep.objects.filter(read_external_content=True).exists()
    assert runs_expire_task.apply().get() == 0
