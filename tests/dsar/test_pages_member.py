"""The member's data-rights page at /data-rights/: file, follow, confirm, cancel, download."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from consent.enums import Category
from dsar import services, wording
from dsar.enums import Jurisdiction, RequestState, VerificationMethod
from dsar.models import DataRightsEvent, DataRightsRequest
from governance.errors import Conflict, IrisError
from governance.models import AuditEvent
from governance.principal import Principal, principal_of
from memory.enums import ScopeKind
from tests.factories import as_member, as_surface

pytestmark = pytest.mark.django_db

HOME = "/data-rights/"


@pytest.fixture(autouse=True)
def no_work(monkeypatch):
    """The work a verified request queues (export, deletion) is other tests' subject: here
    a request stays where the page put it."""
    monkeypatch.setattr(services, "_queue_process", lambda request_id: None)


@pytest.fixture
def browser(member) -> Client:
    client = Client()
    client.force_login(member)
    return client


def text_of(response) -> str:
    """The page's text as read aloud: tags gone, entities decoded, spaces collapsed."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", response.content.decode(), flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def file(member, kind="export", payload=None, *, by=None, now=None):
    return services.data_rights_open(
        principal=by or as_member(member),
        member=member,
        kind=kind,
        payload=payload if payload is not None else {},
        now=now,
    )


def legal_of(make_operator) -> Principal:
    return principal_of(make_operator("legal"))


def nothing_written(before_audit: int) -> None:
    assert DataRightsRequest.objects.count() == 0
    assert DataRightsEvent.objects.count() == 0
    assert AuditEvent.objects.count() == before_audit


# ------------------------------------------------------------------- who may see it


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", HOME),
        ("post", HOME + "export/"),
        ("post", HOME + "delete/"),
        ("post", HOME + "access/"),
        ("post", HOME + "00000000-0000-4000-8000-000000000000/cancel/"),
        ("get", HOME + "00000000-0000-4000-8000-000000000000/download/"),
    ],
)
def test_anonymous_is_sent_to_sign_in(client, db, method, path) -> None:
    response = getattr(client, method)(path)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_an_operator_has_no_member_page(client, make_operator) -> None:
    client.force_login(make_operator("legal"))
    assert client.get(HOME).status_code == 404


def test_the_page_is_linked_from_the_member_home_and_navigation(browser) -> None:
    page = browser.get("/").content.decode()
    assert f'href="{HOME}"' in page
    assert page.count(f'href="{HOME}"') == 2  # the navigation and the card


def test_the_empty_page_offers_every_kind_of_request(browser) -> None:
    response = browser.get(HOME)
    assert response.status_code == 200
    text = text_of(response)
    assert "Your data requests" in text
    assert "You have not made any request yet." in text
    for heading in (
        "Get a copy of your data",
        "See everything Iris holds about you",
        "Delete your data",
    ):
        assert heading in text
    assert "one calendar month" in text  # the tenant's clock, in words
    assert "A legal hold applies" not in text


# ------------------------------------------------------------------- filing


def test_the_member_files_an_export_with_its_flags_and_sees_it(browser, member) -> None:
    response = browser.post(
        HOME + "export/",
        {
            "export-include_consents": "on",
            "export-include_notebooks": "on",
            "export-include_scene_memory": "on",
        },
    )
    request = DataRightsRequest.objects.get(member=member)
    assert response.status_code == 303
    assert response["Location"] == f"{HOME}#request-{request.id}"
    assert request.kind == "export"
    assert request.payload["includeConsents"] is True
    assert request.payload["includeOptOuts"] is False
    assert request.payload["includeNotebooks"] is True
    assert request.payload["includeSessionMemory"] is False
    assert request.payload["includeSceneMemory"] is True
    assert request.payload["includePoseMemory"] is False
    assert request.payload["encrypted"] is False
    text = text_of(browser.get(HOME))
    assert "We received your request: a copy of your data." in text
    assert "Confirmed, about to start" in text
    assert "You asked while signed in" in text
    assert f"Received {request.received_at:%-d %B %Y}" in text
    assert f"We answer by {request.due_at:%-d %B %Y}" in text
    # Only one open export at a time: the form makes way for a sentence.
    assert "You already have an open request for a copy." in text


def test_an_export_with_a_passphrase_is_encrypted_and_the_passphrase_not_stored(
    browser, member
) -> None:
    phrase = "correct horse battery staple"
    response = browser.post(
        HOME + "export/",
        {"export-passphrase": phrase, "export-passphrase_again": phrase},
    )
    assert response.status_code == 303
    request = DataRightsRequest.objects.get(member=member)
    assert request.payload["encrypted"] is True
    assert "passphrase" not in request.payload
    assert request.passphrase_handle
    assert phrase not in browser.get(HOME).content.decode()


@pytest.mark.parametrize(
    ("data", "field_id", "message"),
    [
        (
            {"export-passphrase": "short", "export-passphrase_again": "short"},
            "id_export-passphrase",
            "Your passphrase needs between 12 and 200 characters.",
        ),
        (
            {"export-passphrase": "a long passphrase", "export-passphrase_again": "another"},
            "id_export-passphrase_again",
            "The two passphrases you typed are not the same.",
        ),
    ],
)
def test_a_bad_export_shows_the_fields_error_and_writes_nothing(
    browser, data, field_id, message
) -> None:
    before = AuditEvent.objects.count()
    response = browser.post(HOME + "export/", data)
    assert response.status_code == 400
    page = response.content.decode()
    assert "<title>Error: Your data requests" in page
    assert f'href="#{field_id}"' in page  # the summary links the field
    assert message in text_of(response)
    assert 'aria-invalid="true"' in page
    assert "short" not in re.findall(r'value="([^"]*)"', page)  # never echoed
    nothing_written(before)


def test_a_delete_naming_nothing_shows_the_error_on_its_fields_and_writes_nothing(
    browser,
) -> None:
    before = AuditEvent.objects.count()
    response = browser.post(HOME + "delete/", {"delete-mode": "soft"})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'href="#id_delete-scopes"' in page and 'id="id_delete-scopes"' in page
    assert wording.RULE_WORDS["scope-or-category-required"] in text_of(response)
    nothing_written(before)


def test_a_delete_for_good_needs_the_member_to_say_they_understand(browser, member) -> None:
    before = AuditEvent.objects.count()
    data = {"delete-mode": "hard", "delete-categories": ["medical"]}
    response = browser.post(HOME + "delete/", data)
    assert response.status_code == 400
    assert "Tick this box to delete for good" in text_of(response)
    assert 'value="medical" id="id_delete-categories_' in response.content.decode()
    nothing_written(before)

    response = browser.post(HOME + "delete/", {**data, "delete-understood": "on"})
    assert response.status_code == 303
    request = DataRightsRequest.objects.get(member=member)
    assert request.payload == {
        "mode": "hard",
        "scopes": [],
        "categories": ["medical"],
        "purgeConsentLedger": False,
        "retentionGraceMs": 0,
    }


def test_a_soft_delete_of_kinds_and_topics_keeps_its_grace_window(browser, member) -> None:
    response = browser.post(
        HOME + "delete/",
        {
            "delete-mode": "soft",
            "delete-scopes": ["session", "notebook"],
            "delete-categories": ["preference"],
            "delete-purge_consent_ledger": "on",
        },
    )
    assert response.status_code == 303
    payload = DataRightsRequest.objects.get(member=member).payload
    assert payload["scopes"] == ["notebook", "session"]
    assert payload["categories"] == ["preference"]
    assert payload["purgeConsentLedger"] is True
    assert payload["retentionGraceMs"] > 0
    text = text_of(browser.get(HOME))
    assert "Kinds of memory: Notebooks, From a conversation." in text
    assert "Topics: Likes and preferences." in text


def test_an_unknown_choice_is_the_fields_error(browser) -> None:
    before = AuditEvent.objects.count()
    response = browser.post(HOME + "delete/", {"delete-mode": "soft", "delete-scopes": ["moon"]})
    assert response.status_code == 400
    assert "Kinds of memory: Select a valid choice." in text_of(response)
    nothing_written(before)


def test_a_second_open_request_of_a_kind_is_refused_in_words(browser, member) -> None:
    first = file(member)
    before = AuditEvent.objects.count()
    response = browser.post(HOME + "export/", {"export-include_consents": "on"})
    assert response.status_code == 400
    assert wording.RULE_WORDS["one-open-request-per-kind"] in text_of(response)
    assert list(DataRightsRequest.objects.values_list("id", flat=True)) == [first.id]
    assert AuditEvent.objects.count() == before


def test_the_member_asks_to_see_everything(browser, member) -> None:
    response = browser.post(HOME + "access/")
    assert response.status_code == 303
    assert DataRightsRequest.objects.get(member=member).kind == "access"
    assert "You already have an open request to see your data." in text_of(browser.get(HOME))


# ------------------------------------------------------------------- following


def test_the_member_cancels_a_request_while_it_waits(browser, member) -> None:
    request = file(member)
    response = browser.post(HOME + f"{request.id}/cancel/")
    assert response.status_code == 303
    request.refresh_from_db()
    assert request.state == RequestState.CANCELLED
    text = text_of(browser.get(HOME))
    assert "Cancelled. Nothing was done." in text
    assert "What happened so far with this request" in text
    assert "Cancelled (You)" in text
    assert "Cancel this request" not in text  # no longer offered


def test_a_request_that_started_cannot_be_cancelled(browser, member) -> None:
    request = file(member, "access")
    services.data_rights_transition(
        principal=Principal.system(tenant_id=member.tenant_id),
        member=member,
        request_id=request.id,
        to="in-progress",
    )
    assert "Cancel this request" not in text_of(browser.get(HOME))
    response = browser.post(HOME + f"{request.id}/cancel/", follow=True)
    assert wording.RULE_WORDS["transition-not-allowed"] in text_of(response)
    request.refresh_from_db()
    assert request.state == RequestState.IN_PROGRESS


@pytest.mark.parametrize("action", ["cancel", "appeal", "code", "verify", "download", "report"])
def test_another_members_request_is_404(browser, other_member, action) -> None:
    theirs = file(other_member, "access")
    url = HOME + f"{theirs.id}/{action}/"
    response = browser.get(url) if action in ("download", "report") else browser.post(url)
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.state == RequestState.VERIFIED


def test_another_tenants_request_is_404(browser, foreign_member) -> None:
    theirs = file(foreign_member)
    assert browser.post(HOME + f"{theirs.id}/cancel/").status_code == 404
    assert browser.get(HOME + f"{theirs.id}/download/").status_code == 404


def test_a_request_a_surface_filed_is_confirmed_with_an_emailed_code(
    browser, member, django_capture_on_commit_callbacks
) -> None:
    member.email = "ada@example.org"
    member.save(update_fields=["email"])
    request = file(member, by=as_surface(member))
    text = text_of(browser.get(HOME))
    assert "Waiting for you to confirm it is you" in text
    assert "An app, for you" in text

    with django_capture_on_commit_callbacks(execute=True):
        sent = browser.post(HOME + f"{request.id}/code/", follow=True)
    assert "We emailed you a code." in text_of(sent)
    code = re.search(r"\b(\d{8})\b", mail.outbox[-1].body).group(1)

    before = DataRightsEvent.objects.count()
    wrong = "0" * 8 if code != "0" * 8 else "1" * 8
    response = browser.post(HOME + f"{request.id}/verify/", {"code": wrong})
    assert response.status_code == 400
    assert wording.RULE_WORDS["code-wrong"] in text_of(response)
    assert f'id="code-{request.id}"' in response.content.decode()
    assert 'aria-invalid="true"' in response.content.decode()
    assert DataRightsEvent.objects.count() == before

    empty = browser.post(HOME + f"{request.id}/verify/", {"code": ""})
    assert empty.status_code == 400 and "Your code: This field is required." in text_of(empty)

    response = browser.post(HOME + f"{request.id}/verify/", {"code": code})
    assert response.status_code == 303
    request.refresh_from_db()
    assert request.state == RequestState.VERIFIED
    assert request.verification_method == VerificationMethod.EMAIL_LINK
    assert "With a code we emailed you" in text_of(browser.get(HOME))


def test_an_extension_shows_the_new_date_and_its_reason(browser, member, make_operator) -> None:
    request = file(member)
    services.data_rights_extend(
        principal=legal_of(make_operator),
        request_id=request.id,
        reason="Your memory is large and spread over many apps.",
    )
    request.refresh_from_db()
    text = text_of(browser.get(HOME))
    assert f"We answer by {request.due_at:%-d %B %Y} (extended)" in text
    assert "Why we need more time Your memory is large and spread over many apps." in text


def test_a_legal_hold_is_shown_to_the_member_without_its_reason(
    browser, member, make_operator
) -> None:
    services.legal_hold_place(
        principal=legal_of(make_operator), member=member, reason="Litigation 2026-114"
    )
    file(member, "delete", {"mode": "soft", "categories": ["fact"]})
    text = text_of(browser.get(HOME))
    assert "A legal hold applies." in text
    assert wording.HELD_NEXT in text
    assert "Litigation" not in text


def test_no_raw_value_reaches_the_member_page(browser, member, make_operator) -> None:
    """Every state, method, kind of memory and topic is shown in words."""
    member.email = "ada@example.org"
    member.save(update_fields=["email"])
    legal = legal_of(make_operator)
    system = Principal.system(tenant_id=member.tenant_id)
    long_ago = timezone.now() - timedelta(days=20)
    failed = file(member, "access", now=long_ago)
    for target in ("in-progress", "failed"):
        services.data_rights_transition(
            principal=system,
            member=member,
            request_id=failed.id,
            to=target,
            reason_code="work-failed" if target == "failed" else "",
        )
    file(member, "access")
    file(
        member,
        "delete",
        {
            "mode": "soft",
            "scopes": [k.value for k in ScopeKind],
            "categories": [c.value for c in Category],
        },
        by=as_surface(member),
    )
    services.legal_hold_place(principal=legal, member=member, reason="hold")
    text = text_of(browser.get(HOME))
    raw = {
        RequestState.IN_PROGRESS.value,
        *(m.value for m in VerificationMethod),
        *(j.value for j in Jurisdiction),
        *(k.value for k in ScopeKind if "-" in k.value),
        *(c.value for c in Category if "_" in c.value),
        "work-failed",
        "verification-window-passed",
        "includeConsents",
        "retentionGraceMs",
    }
    found = sorted(
        value for value in raw if re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text)
    )
    assert found == []
    for label in (
        wording.STATE_LABELS["failed"],
        wording.STATE_LABELS["verified"],
        wording.STATE_LABELS["submitted"],
        wording.FAIL_REASONS["work-failed"],
        "Notes by support staff",
        "Mental health",
    ):
        assert label in text


def test_the_page_reads_the_same_number_of_queries_however_many_requests(browser, member) -> None:
    file(member)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert browser.get(HOME).status_code == 200
        return len(captured)

    one = queries()
    request = file(member, "access")
    services.data_rights_transition(
        principal=as_member(member), member=member, request_id=request.id, to="cancelled"
    )
    file(member, "access")
    file(member, "delete", {"mode": "soft", "categories": ["fact"]})
    assert queries() == one


# ------------------------------------------------------------------- download and report


def test_the_download_serves_the_bundle_as_an_attachment(
    browser, member, monkeypatch, tmp_path
) -> None:
    request = file(member)
    bundle = tmp_path / "bundle.zip"
    bundle.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    calls = []

    def bundle_for_download(*, principal, member, request_id):
        calls.append((principal.kind, member.pk, request_id))
        return bundle, "iris-export.zip"

    monkeypatch.setattr("dsar.export.bundle_for_download", bundle_for_download, raising=False)
    response = browser.get(HOME + f"{request.id}/download/")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="iris-export.zip"'
    assert b"".join(response.streaming_content) == bundle.read_bytes()
    assert calls == [("member", member.pk, request.id)]


@pytest.mark.parametrize(
    ("error", "status", "words"),
    [
        (Conflict("not ready", code="bundle-not-ready"), 409, "Your copy is not ready yet."),
        (IrisError("gone", status=410, code="bundle-expired"), 410, "no longer available"),
    ],
)
def test_a_download_that_cannot_be_served_is_a_plain_page(
    browser, member, monkeypatch, error, status, words
) -> None:
    request = file(member)

    def bundle_for_download(**_):
        raise error

    monkeypatch.setattr("dsar.export.bundle_for_download", bundle_for_download, raising=False)
    response = browser.get(HOME + f"{request.id}/download/")
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    assert words in text_of(response)


def test_a_completed_access_request_shows_the_report(browser, member, monkeypatch) -> None:
    request = file(member, "access")
    system = Principal.system(tenant_id=member.tenant_id)
    assert browser.get(HOME + f"{request.id}/report/").status_code == 409
    for target in ("in-progress", "completed"):
        services.data_rights_transition(
            principal=system, member=member, request_id=request.id, to=target
        )
    report = {
        "userId": str(member.public_id),
        "scopes": ["profile", "operator-copilot"],
        "sections": {
            "memories": [
                {
                    "body": "I live in Lyon",
                    "scopeKind": "profile",
                    "category": "mental_health",
                    "origin": "user-stated",
                    "captureMethod": "settings-toggle",
                    "createdAt": "2026-12-02T13:28:01.657831Z",
                    "supersedes": None,
                    "fingerprint": "f" * 64,
                }
            ],
            "consents-active": {"granted": ["data_processing"], "eventCount": 2},
            "opt-outs": [],
        },
    }
    monkeypatch.setattr("dsar.access.access_report", lambda *, member: report, raising=False)
    home = text_of(browser.get(HOME))
    assert "See what Iris holds about you" in home and "Your report is ready." in home
    response = browser.get(HOME + f"{request.id}/report/")
    assert response.status_code == 200
    text = text_of(response)
    assert "What Iris holds about you" in text
    assert "Your memories (1)" in text and "I live in Lyon" in text
    assert "Scope kind About you" in text and "Category Mental health" in text
    assert "Origin You said" in text and "Created at 2 December 2026, 13:28 UTC" in text
    assert "Scopes About you, Notes by support staff" in text
    assert "Capture method On your consent page" in text
    assert "Supersedes" not in text  # empty fields are left out
    assert "Event count 2" in text
    assert "Features you switched off (0)" in text and "Nothing." in text
    assert f'<span class="token">{"f" * 64}</span>' in response.content.decode()
    for raw in ("mental_health", "user-stated", "operator-copilot"):
        assert raw not in text


def test_the_member_asks_to_look_again_at_a_finished_request(browser, member) -> None:
    request = file(member, "access")
    system = Principal.system(tenant_id=member.tenant_id)
    assert "Ask us to look at this again" not in text_of(browser.get(HOME))
    for target in ("in-progress", "failed"):
        services.data_rights_transition(
            principal=system, member=member, request_id=request.id, to=target
        )
    assert "Ask us to look at this again" in text_of(browser.get(HOME))
    response = browser.post(HOME + f"{request.id}/appeal/", follow=True)
    assert "We will look at this request again." in text_of(response)
    request.refresh_from_db()
    assert request.state == RequestState.APPEALED
    assert wording.STATE_LABELS["appealed"] in text_of(response)
