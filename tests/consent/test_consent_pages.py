"""The member's consent page at /consent/."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from consent.enums import SENSITIVE_CATEGORIES
from consent.models import ConsentEvent
from consent.selectors import active_consent_types, opted_out_categories
from consent.services import consent_purge_categories, consent_record
from consent.signals import sensitive_consent_revoked
from consent.views import CATEGORY_COPY, GENERAL_COPY, OPT_OUT_COPY
from governance.principal import Principal

pytestmark = pytest.mark.django_db

HOME = "/consent/"
MEDICAL = "category:medical"


@pytest.fixture
def browser(client, member) -> Client:
    client.force_login(member)
    return client


def granted(member) -> frozenset[str]:
    return active_consent_types(tenant_id=member.tenant_id, member=member)


def text_of(response) -> str:
    """The page's text as read aloud: inline tags vanish, block tags separate words."""
    page = re.sub(r"</?(?:span|strong|time|a|em)\b[^>]*>", "", response.content.decode())
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def record(member, consent_type, status="granted", **extra):
    principal = Principal(kind="member", id=member.public_id, tenant_id=member.tenant_id)
    capture_method = "settings-toggle"
    if "occurred_at" in extra:
        # Only an import may date an act in the past (consent.capture).
        principal, capture_method = Principal.system("dsar", member.tenant_id), "dsar-import"
    return consent_record(
        principal=principal,
        member=member,
        consent_type=consent_type,
        status=status,
        legal_basis="explicit_consent" if consent_type.startswith("category:") else "consent",
        capture_method=capture_method,
        **extra,
    )


# ---------------------------------------------------------------- what the member sees


def test_the_member_sees_every_consent_with_what_it_unlocks_and_what_revoking_does(browser) -> None:
    response = browser.get(HOME)
    assert response.status_code == 200
    text = text_of(response)
    for label, _ in CATEGORY_COPY.values():
        assert label in text
    for copy in (*GENERAL_COPY.values(), *OPT_OUT_COPY.values()):
        assert copy.label in text and copy.unlocks in text and copy.revoking in text
    assert text.count("Give consent for") == len(SENSITIVE_CATEGORIES) + len(GENERAL_COPY)
    assert "Everything Iris remembers about medical care is deleted" in text
    assert "Nothing recorded yet." in text


def test_the_page_is_linked_from_the_member_navigation(browser) -> None:
    assert f'href="{HOME}"' in browser.get("/").content.decode()


def test_the_page_carries_no_inline_script_or_style(browser) -> None:
    page = browser.get(HOME).content.decode()
    assert "<style" not in page and " style=" not in page
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page) == []
    assert re.search(r"\son[a-z]+=", page) is None  # no inline event handlers


def test_every_form_posts_with_a_csrf_token_and_a_named_button(browser) -> None:
    page = browser.get(HOME).content.decode()
    forms = re.findall(r"<form .*?</form>", page, flags=re.S)
    consent_forms = [f for f in forms if "/consent/" in f]
    assert len(consent_forms) == len(SENSITIVE_CATEGORIES) + len(GENERAL_COPY) + len(OPT_OUT_COPY)
    for form in consent_forms:
        assert 'method="post"' in form and "csrfmiddlewaretoken" in form
        assert re.search(r'<span class="visually-hidden">[^<]+</span></button>', form)


def test_the_history_lists_every_change_newest_first(browser, member) -> None:
    now = timezone.now()
    record(member, MEDICAL, occurred_at=now - timedelta(hours=2))
    record(member, "data_processing", occurred_at=now - timedelta(hours=1))
    # A paper revocation dated before the grant: recorded, but it changed nothing.
    record(member, MEDICAL, status="revoked", occurred_at=now - timedelta(days=3))
    text = text_of(browser.get(HOME))
    history = text.split("Your consent history", 1)[1]
    assert history.index("Use what you say to answer you") < history.index("Medical care Given")
    assert "Medical care Withdrawn" in history
    assert "No effect: a later choice of yours already stood." in history
    assert "recorded " in history


def test_erased_entries_are_counted_but_not_shown(browser, member) -> None:
    record(member, MEDICAL)
    record(member, "data_processing")
    consent_purge_categories(
        principal=Principal.system("dsar", member.tenant_id), member=member, categories=["medical"]
    )
    text = text_of(browser.get(HOME))
    assert "1 entry was erased at your request." in text
    assert "Medical care Given" not in text


def test_the_page_costs_a_fixed_number_of_queries(
    browser, member, django_assert_max_num_queries
) -> None:
    for consent_type in ("data_processing", "data_storage", MEDICAL, "category:financial"):
        record(member, consent_type)
    with django_assert_max_num_queries(4):  # session, user, ledger (+ messages)
        assert browser.get(HOME).status_code == 200


# ---------------------------------------------------------------- grant and revoke


def test_granting_a_sensitive_category_is_one_post(browser, member) -> None:
    response = browser.post("/consent/grant/", {"consent_type": MEDICAL})
    assert response.status_code == 303
    assert response["Location"] == "/consent/#consent-category-medical"
    assert granted(member) == {MEDICAL}
    body = ConsentEvent.objects.get().body
    assert (body.capture_method, body.legal_basis) == ("settings-toggle", "explicit_consent")
    page = browser.get(HOME)
    assert "Consent given: Medical care." in text_of(page)
    assert "Withdraw consent for Medical care" in text_of(page)


def test_a_cascading_revocation_first_states_what_will_be_deleted(
    browser, member, django_capture_on_commit_callbacks
) -> None:
    record(member, MEDICAL)
    received: list[dict] = []

    def listener(sender, **kwargs):
        received.append(kwargs)

    sensitive_consent_revoked.connect(listener, weak=False)
    try:
        confirm = browser.post("/consent/revoke/", {"consent_type": MEDICAL})
        assert confirm.status_code == 200
        text = text_of(confirm)
        assert "Withdraw consent for Medical care?" in text
        assert "What will be deleted" in text
        assert "Everything Iris remembers about medical care is deleted" in text
        assert granted(member) == {MEDICAL}  # nothing happened yet
        assert 'name="confirmed"' in confirm.content.decode()

        with django_capture_on_commit_callbacks(execute=True):
            done = browser.post("/consent/revoke/", {"consent_type": MEDICAL, "confirmed": "on"})
    finally:
        sensitive_consent_revoked.disconnect(listener)
    assert done.status_code == 303
    assert granted(member) == frozenset()
    assert [r["categories"] for r in received] == [["medical"]]


def test_a_revocation_that_deletes_nothing_needs_no_confirmation(browser, member) -> None:
    record(member, "data_storage")
    response = browser.post("/consent/revoke/", {"consent_type": "data_storage"})
    assert response.status_code == 303
    assert granted(member) == frozenset()


def test_withdrawing_what_was_never_given_explains_and_changes_nothing(browser, member) -> None:
    response = browser.post("/consent/revoke/", {"consent_type": "data_storage"}, follow=True)
    assert "not currently granted" in text_of(response)
    assert not ConsentEvent.objects.exists()


def test_a_tampered_form_changes_nothing(browser) -> None:
    response = browser.post("/consent/grant/", {"consent_type": "telepathy"}, follow=True)
    assert "Nothing was changed." in text_of(response)
    assert not ConsentEvent.objects.exists()


def test_a_feature_is_switched_off_and_back_on(browser, member) -> None:
    browser.post("/consent/opt-out/", {"category": "personalization"})
    assert opted_out_categories(tenant_id=member.tenant_id, member=member) == {"personalization"}
    assert "Switch back on: Personalisation" in text_of(browser.get(HOME))
    response = browser.post("/consent/opt-in/", {"category": "personalization"})
    assert response["Location"] == "/consent/#opt-out-personalization"
    assert opted_out_categories(tenant_id=member.tenant_id, member=member) == frozenset()


# ---------------------------------------------------------------- who may use it


@pytest.mark.parametrize(
    ("method", "url"),
    [("get", HOME), ("post", "/consent/grant/"), ("post", "/consent/revoke/")],
)
def test_operators_get_404(client, make_operator, method, url) -> None:
    client.force_login(make_operator("admin"))
    response = getattr(client, method)(url, {"consent_type": MEDICAL} if method == "post" else None)
    assert response.status_code == 404
    assert not ConsentEvent.objects.exists()


@pytest.mark.parametrize(("method", "url"), [("get", HOME), ("post", "/consent/grant/")])
def test_anonymous_is_sent_to_sign_in(client, method, url) -> None:
    response = getattr(client, method)(url, {"consent_type": MEDICAL} if method == "post" else None)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")
    assert not ConsentEvent.objects.exists()


def test_a_post_without_the_csrf_token_is_refused(member) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    response = client.post("/consent/grant/", {"consent_type": MEDICAL})
    assert response.status_code == 403
    assert not ConsentEvent.objects.exists()


def test_changes_are_posts_only(browser) -> None:
    assert browser.get("/consent/grant/").status_code == 405
    assert browser.post(HOME).status_code == 405
