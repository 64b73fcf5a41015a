"""The operator console's inspection pages at /inspections/."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from guardian.shortcuts import remove_perm

from governance.models import AuditEvent
from inspection import wording
from inspection.enums import InspectionState, Refusal
from inspection.models import Inspection, SnapshotRead
from tests.inspection.conftest import consent_snapshot, move, request

pytestmark = pytest.mark.django_db

HOME = "/inspections/"
AUDIT = "/inspections/audit/"


def text_of(response) -> str:
    page = re.sub(r"</?(?:span|strong|time|a|em|code)\b[^>]*>", "", response.content.decode())
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def detail(inspection) -> str:
    return f"{HOME}{inspection.id}/"


def refusals(code: str) -> int:
    return AuditEvent.objects.filter(reason_code=code).count()


# ------------------------------------------------------------------- who may enter


def test_anonymous_is_sent_to_sign_in(client, db) -> None:
    for url in (HOME, AUDIT, HOME + "mine/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_a_member_gets_403_on_the_console(client, member) -> None:
    client.force_login(member)
    for url in (HOME, AUDIT):
        response = client.get(url)
        assert response.status_code == 403
    assert client.post(HOME + "request/", {"member": "ada"}).status_code == 403
    assert not Inspection.objects.exists()


def test_an_operator_without_the_permission_gets_403(ops, tenant, member) -> None:
    support = ops["support"]
    remove_perm("governance.request_inspection", support, tenant)
    response = signed_in(support).get(HOME)
    assert response.status_code == 403
    assert "Inspections are for the operators of your organisation." in text_of(response)


def test_support_gets_403_on_the_audit_check(ops) -> None:
    client = signed_in(ops["support"])
    assert client.get(AUDIT).status_code == 403
    assert client.post(AUDIT).status_code == 403


def test_the_console_links_to_inspections_and_the_audit_check(ops) -> None:
    page = signed_in(ops["admin"]).get("/").content.decode()
    assert f'href="{HOME}"' in page and f'href="{AUDIT}"' in page


def test_another_tenants_inspection_is_404(ops, foreign_admin, remembered) -> None:
    member, _ = remembered
    ours = request(ops["support"], member)
    client = signed_in(foreign_admin)
    assert client.get(detail(ours)).status_code == 404
    assert client.get(detail(ours) + "snapshot/").status_code == 404
    for action, data in (
        ("grant/", {}),
        ("deny/", {"deny-reason": "not-necessary"}),
        ("withdraw/", {}),
        ("close/", {}),
    ):
        assert client.post(detail(ours) + action, data).status_code == 404
    assert str(ours.id) not in client.get(HOME).content.decode()
    ours.refresh_from_db()
    assert ours.state == InspectionState.ROUTINE_REVIEW


def test_a_member_of_another_tenant_cannot_be_requested(ops, foreign_member) -> None:
    response = signed_in(ops["support"]).post(
        HOME + "request/",
        {
            "member": str(foreign_member.public_id),
            "path": "routine-review",
            "sensitivity": "standard",
            "justification": "Looking around.",
        },
    )
    assert response.status_code == 400
    assert "No member of your organisation has this username or id." in text_of(response)
    assert not Inspection.objects.exists()


# ------------------------------------------------------------------- request, review, close


def test_request_grant_view_close_through_the_pages(ops, remembered) -> None:
    member, entries = remembered
    requester, reviewer = signed_in(ops["support"]), signed_in(ops["admin"])
    response = requester.post(
        HOME + "request/",
        {
            "member": "ada",
            "path": "routine-review",
            "sensitivity": "standard",
            "justification": "The member says a reminder is wrong.",
        },
    )
    assert response.status_code == 303
    inspection = Inspection.objects.get()
    assert response["Location"] == detail(inspection)
    page = text_of(requester.get(detail(inspection)))
    assert "Waiting for a reviewer" in page and "Routine review" in page
    assert "you cannot grant your own" in page

    # The reviewer sees it waiting and grants it.
    assert str(inspection.id) in reviewer.get(HOME).content.decode()
    response = reviewer.post(detail(inspection) + "grant/", {})
    assert response.status_code == 303
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.GRANTED

    page = text_of(requester.get(detail(inspection)))
    assert "Granted" in page and "View the snapshot" in page
    snapshot = requester.get(detail(inspection) + "snapshot/")
    assert snapshot.status_code == 200
    text = text_of(snapshot)
    assert "My favourite colour is blue" in text
    assert "insulin" not in text  # a standard inspection never shows sensitive memory
    assert "Baker Street" not in text  # identifiers are tokenised outside data rights
    assert SnapshotRead.objects.filter(inspection=inspection).count() == 1
    # Only the requester reads it.
    refused = reviewer.get(detail(inspection) + "snapshot/")
    assert refused.status_code == 403
    assert wording.REFUSAL_WORDS[Refusal.NOT_PERMITTED] in text_of(refused)

    response = requester.post(detail(inspection) + "close/", {})
    assert response.status_code == 303
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.CLOSED
    assert "Not needed: no sensitive memory was in the snapshot." in text_of(
        requester.get(detail(inspection))
    )
    gone = requester.get(detail(inspection) + "snapshot/")
    assert gone.status_code == 403
    assert "The grant has run out" in text_of(gone)


def test_self_grant_is_refused_in_words_and_changes_nothing(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(ops["admin"], member)
    before = refusals(Refusal.SELF_GRANT)
    response = signed_in(ops["admin"]).post(detail(inspection) + "grant/", {})
    assert response.status_code == 400
    assert wording.REFUSAL_WORDS[Refusal.SELF_GRANT] in text_of(response)
    assert 'role="alert"' in response.content.decode()
    assert "Deny access" not in text_of(response)  # the requester withdraws, never denies
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.ROUTINE_REVIEW
    assert refusals(Refusal.SELF_GRANT) == before + 1  # the attempt is on record


def test_a_gate_refusal_is_shown_in_words(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(
        ops["legal"],
        member,
        "dsar-fulfillment",
        sensitivity="sensitive",
        consent_snapshot_id=consent_snapshot(member),
    )
    response = signed_in(ops["admin"]).post(
        detail(inspection) + "grant/", {"grant-consent_snapshot_id": "not-a-uuid"}
    )
    assert response.status_code == 400
    assert "This is not in the right form." in text_of(response)
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.DSAR_FULFILLMENT


def test_support_cannot_review(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(ops["admin"], member)
    response = signed_in(ops["support"]).post(detail(inspection) + "grant/", {})
    assert response.status_code == 400
    assert wording.REFUSAL_WORDS[Refusal.REVIEWER_NOT_PERMITTED] in text_of(response)
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.ROUTINE_REVIEW


def test_deny_and_withdraw(ops, remembered) -> None:
    member, _ = remembered
    first = request(ops["support"], member)
    response = signed_in(ops["legal"]).post(
        detail(first) + "deny/", {"deny-reason": "not-necessary"}
    )
    assert response.status_code == 303
    first.refresh_from_db()
    assert first.state == InspectionState.DENIED
    page = text_of(signed_in(ops["support"]).get(detail(first)))
    assert wording.DENY_REASONS["not-necessary"] in page

    second = request(ops["support"], member)
    assert signed_in(ops["support"]).post(detail(second) + "withdraw/").status_code == 303
    second.refresh_from_db()
    assert second.state == InspectionState.DENIED


def test_bad_request_shows_the_field_error_and_changes_nothing(ops, member) -> None:
    client = signed_in(ops["support"])
    before = refusals(Refusal.JUSTIFICATION_REQUIRED)
    response = client.post(
        HOME + "request/",
        {
            "member": "ada",
            "path": "routine-review",
            "sensitivity": "standard",
            "justification": " ",
        },
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Justification: Say why you need to look" in text_of(response)
    assert 'aria-invalid="true"' in page
    assert "<title>Error: Inspections" in page
    assert refusals(Refusal.JUSTIFICATION_REQUIRED) == before + 1

    response = client.post(HOME + "request/", {"member": "", "path": "nosuch"})
    assert response.status_code == 400
    text = text_of(response)
    assert "Member: This field is required." in text
    assert "Why you need to look: Select a valid choice." in text
    assert not Inspection.objects.exists()


def test_bad_deny_reason_is_a_field_error(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(ops["support"], member)
    response = signed_in(ops["legal"]).post(detail(inspection) + "deny/", {"deny-reason": "x"})
    assert response.status_code == 400
    assert "Why you deny it: Select a valid choice." in text_of(response)
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.ROUTINE_REVIEW


def test_the_pages_show_no_raw_values(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(ops["support"], member)
    move(ops["admin"], inspection, "granted")
    client = signed_in(ops["support"])
    for url in (HOME, detail(inspection), detail(inspection) + "snapshot/"):
        text = text_of(client.get(url))
        for raw in ("routine-review", "dsar-fulfillment", "trust-and-safety", "granted "):
            assert raw not in text, (url, raw)


def test_the_list_reads_a_fixed_number_of_queries(
    ops, remembered, django_assert_max_num_queries
) -> None:
    member, _ = remembered
    for _ in range(3):
        request(ops["support"], member)
    client = signed_in(ops["admin"])
    with django_assert_max_num_queries(12):
        assert client.get(HOME).status_code == 200


# ------------------------------------------------------------------- the audit check


def test_the_audit_check_runs_and_shows_the_result(ops, remembered) -> None:
    member, _ = remembered
    request(ops["support"], member)
    client = signed_in(ops["legal"])
    assert "Not checked in this session yet." in text_of(client.get(AUDIT))
    response = client.post(AUDIT)
    assert response.status_code == 303 and response["Location"] == AUDIT
    text = text_of(client.get(AUDIT))
    assert text.count("The chain verifies.") == 1
    assert re.search(r"\d+ events of your organisation", text)


def test_the_audit_check_shows_a_break(ops, remembered, monkeypatch) -> None:
    from governance.audit import ChainBreak, VerifyReport

    member, _ = remembered
    chain = str(ops["admin"].tenant_id)
    monkeypatch.setattr(
        "inspection.views.verify_chain",
        lambda: VerifyReport(3, 1, 0, ChainBreak("e", chain, 2, "content does not match")),
    )
    client = signed_in(ops["admin"])
    client.post(AUDIT)
    assert "breaks at event 2: content does not match" in text_of(client.get(AUDIT))


# ------------------------------------------------------------------- incident escalation


def test_trust_and_safety_issues_a_reference_shown_once_and_escalates_with_it(
    ops, remembered
) -> None:
    member, _ = remembered
    tns = signed_in(ops["tns"])
    response = tns.post(HOME + "references/", {"issue-member": "ada", "issue-hours": "24"})
    assert response.status_code == 303
    page = tns.get(HOME).content.decode()
    reference = re.search(r"(iris-inc1\.[^<\s]+)", page)
    assert reference is not None
    assert "iris-inc1." not in tns.get(HOME).content.decode()  # shown once only

    response = tns.post(
        HOME + "request/",
        {
            "member": str(member.public_id),
            "path": "incident-escalation",
            "sensitivity": "sensitive",
            "justification": "Report of abuse against the member.",
            "incident_reference": reference.group(1),
            "consent_snapshot_id": consent_snapshot(member),
        },
    )
    assert response.status_code == 303
    inspection = Inspection.objects.get()
    assert signed_in(ops["tns2"]).post(detail(inspection) + "grant/", {}).status_code == 303
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.GRANTED

    # Trust and safety may close it without telling the member: an active investigation.
    assert "Do not tell the member" in text_of(tns.get(detail(inspection)))
    response = tns.post(detail(inspection) + "close/", {"close-carve_out": "on"})
    assert response.status_code == 303
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.CLOSED and inspection.carve_out
    assert "Withheld: closed under an investigation carve-out" in text_of(
        tns.get(detail(inspection))
    )


def test_only_trust_and_safety_issues_references(ops, member) -> None:
    client = signed_in(ops["legal"])
    assert "Issue an incident reference" not in text_of(client.get(HOME))
    response = client.post(HOME + "references/", {"issue-member": "ada", "issue-hours": "24"})
    assert response.status_code == 400
    assert wording.REFUSAL_WORDS[Refusal.NOT_PERMITTED] in text_of(response)


def test_a_forged_reference_is_refused_in_words(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(
        ops["tns"],
        member,
        "incident-escalation",
        incident_reference="iris-inc1.00000000-0000-0000-0000-000000000000.1.k.abc",
    )
    response = signed_in(ops["tns2"]).post(detail(inspection) + "grant/", {})
    assert response.status_code == 400
    assert wording.REFUSAL_WORDS[Refusal.NO_LEGITIMATE_INTEREST] in text_of(response)
    inspection.refresh_from_db()
    assert inspection.state == InspectionState.INCIDENT_ESCALATION


# ------------------------------------------------------------------- replay


def test_an_auditor_replays_what_was_seen_after_the_member_forgot(ops, remembered) -> None:
    from memory.services import memory_forget
    from tests.factories import as_member

    member, entries = remembered
    inspection = request(ops["support"], member)
    move(ops["admin"], inspection, "granted")
    assert "Replay what was seen" not in text_of(signed_in(ops["support"]).get(detail(inspection)))
    memory_forget(principal=as_member(member), member=member, entry_id=entries["colour"].entry_id)

    auditor = signed_in(ops["legal"])
    assert "Replay what was seen" in text_of(auditor.get(detail(inspection)))
    response = auditor.get(detail(inspection) + "replay/")
    assert response.status_code == 200
    text = text_of(response)
    assert "Replay of the snapshot of ada's memory" in text
    assert "Forgotten since" in text and "My favourite colour is blue" not in text
    assert SnapshotRead.objects.filter(inspection=inspection, kind="replayed").count() == 1
    # Support is no auditor: refused in words, nothing recorded.
    refused = signed_in(ops["support"]).get(detail(inspection) + "replay/")
    assert refused.status_code == 403
    assert wording.REFUSAL_WORDS[Refusal.NOT_PERMITTED] in text_of(refused)
    assert SnapshotRead.objects.filter(inspection=inspection, kind="replayed").count() == 1


def test_support_has_nothing_to_review(ops, remembered) -> None:
    member, _ = remembered
    request(ops["admin"], member)
    text = text_of(signed_in(ops["support"]).get(HOME))
    assert "Your role asks for access" in text
    assert "Waiting for a reviewer" in text  # still in the open list
