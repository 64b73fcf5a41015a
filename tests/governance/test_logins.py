"""Sign-in from outside (issue 19, finding 6): the login page throttles and audits, operator
sessions are short, and an enrolled operator needs a single-use TOTP code."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pyotp
import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from governance import accounts
from governance.audit import Actor, canonical_json
from governance.models import AuditEvent, OperatorTotp, VaultSecret

LOGIN = "/accounts/login/"
CODE = "/accounts/login/code/"
SETUP = "/accounts/two-step/"
NOW = datetime(2026, 3, 2, 9, 0, 15, tzinfo=UTC)

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(make_operator):
    return make_operator("support")


def password_of(user) -> str:
    return "pw-" + user.username


def sign_in(client: Client, username: str, password: str, **extra):
    return client.post(LOGIN, {"username": username, "password": password}, **extra)


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def all_audit_text() -> str:
    return "".join(
        canonical_json({"a": e.actor_id, "r": e.reason_code, "s": e.subject_ids, "p": e.payload})
        .decode()
        .lower()
        for e in AuditEvent.objects.all()
    )


class FixedClock:
    """`timezone` for governance.accounts: TOTP steps are computed at a chosen instant."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


@pytest.fixture
def clock(monkeypatch):
    fixed = FixedClock(NOW)
    monkeypatch.setattr(accounts, "timezone", fixed)
    return fixed


def code_at(secret: str, at: datetime, steps_ahead: int = 0) -> str:
    totp = pyotp.TOTP(secret)
    return totp.generate_otp(totp.timecode(at) + steps_ahead)


def enrol(operator, clock) -> str:
    actor = Actor("operator", str(operator.public_id))
    secret = accounts.totp_enrolment_start(actor=actor, user=operator).secret
    assert accounts.totp_enrolment_confirm(
        actor=actor, user=operator, code=code_at(secret, clock.at)
    )
    return secret


# -- throttling ----------------------------------------------------------------------------


def test_right_password_is_refused_after_the_failure_limit(operator) -> None:
    client = Client()
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        response = sign_in(client, operator.username, f"wrong-{attempt}")
    assert response.status_code == 429

    response = sign_in(client, operator.username, password_of(operator))
    assert response.status_code == 429
    assert not signed_in(client)
    page = response.content.decode()
    assert "Signing in is paused" in page and "15 minutes" in page
    assert "Traceback" not in page and password_of(operator) not in page


def test_twenty_five_wrong_passwords_then_the_right_one_does_not_sign_in(operator) -> None:
    client = Client()
    for attempt in range(25):
        sign_in(client, operator.username, f"wrong-{attempt}")
    sign_in(client, operator.username, password_of(operator))
    assert not signed_in(client)
    assert Client().get("/").status_code == 302


def test_a_username_is_locked_from_every_address(operator) -> None:
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        sign_in(Client(), operator.username, "wrong", REMOTE_ADDR=f"10.0.0.{attempt + 1}")
    client = Client()
    response = sign_in(client, operator.username, password_of(operator), REMOTE_ADDR="10.9.9.9")
    assert response.status_code == 429 and not signed_in(client)


def test_an_address_trying_many_usernames_is_locked(operator) -> None:
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        sign_in(Client(), f"nobody-{attempt}", "wrong", REMOTE_ADDR="10.1.1.1")
    client = Client()
    response = sign_in(client, operator.username, password_of(operator), REMOTE_ADDR="10.1.1.1")
    assert response.status_code == 429 and not signed_in(client)
    other = Client()
    sign_in(other, operator.username, password_of(operator), REMOTE_ADDR="10.2.2.2")
    assert signed_in(other)


def test_the_lockout_ends_after_the_cool_off(operator) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(Client(), operator.username, "wrong")
    AccessAttempt.objects.update(
        attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )
    client = Client()
    sign_in(client, operator.username, password_of(operator))
    assert signed_in(client)


def test_a_few_failures_then_success_clears_the_count(operator) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(client, operator.username, "wrong")
    sign_in(client, operator.username, password_of(operator))
    assert signed_in(client)
    assert not AccessAttempt.objects.exists()


# -- audit ---------------------------------------------------------------------------------


def test_operator_login_success_is_audited_without_password_or_username(operator) -> None:
    client = Client()
    sign_in(client, operator.username, password_of(operator))
    assert signed_in(client)
    (event,) = events("iris.account.login.succeeded")
    assert event.tenant_id == operator.tenant_id
    assert event.actor_kind == "operator" and event.actor_id == str(operator.public_id)
    assert event.subject_ids == [str(operator.public_id)]
    assert event.reason_code == "password"
    text = all_audit_text()
    assert password_of(operator).lower() not in text
    assert operator.username.lower() not in text and "127.0.0.1" not in text


def test_operator_login_failure_is_audited_without_password(operator) -> None:
    sign_in(Client(), operator.username, "hunter2-wrong")
    (event,) = events("iris.account.login.failed")
    assert event.tenant_id == operator.tenant_id
    assert event.subject_ids == [str(operator.public_id)]
    assert event.reason_code == "bad-credentials" and event.severity == "warning"
    assert event.payload["accountKind"] == "operator"
    assert "addressFingerprint" in event.payload
    text = all_audit_text()
    assert "hunter2" not in text and operator.username.lower() not in text


def test_unknown_username_failure_is_fingerprinted_not_stored(db) -> None:
    sign_in(Client(), "mallory-guess", "pw-guess")
    sign_in(Client(), "mallory-guess", "pw-guess-2")
    first, second = events("iris.account.login.failed")
    assert first.tenant_id is None and first.subject_ids == []
    fingerprint = first.payload["usernameFingerprint"]
    assert fingerprint == second.payload["usernameFingerprint"]
    assert fingerprint == accounts.login_fingerprint("mallory-guess")
    text = all_audit_text()
    assert "mallory" not in text and "pw-guess" not in text


def test_lockout_is_audited_once_and_refused_attempts_after_it(operator) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(Client(), operator.username, "wrong")
    sign_in(Client(), operator.username, password_of(operator))
    (locked,) = events("iris.account.login.locked_out")
    assert locked.subject_ids == [str(operator.public_id)]
    assert locked.payload["failureLimit"] == settings.AXES_FAILURE_LIMIT
    reasons = [e.reason_code for e in events("iris.account.login.failed")]
    assert reasons == ["bad-credentials"] * settings.AXES_FAILURE_LIMIT + ["locked-out"]
    assert not events("iris.account.login.succeeded")
    assert password_of(operator).lower() not in all_audit_text()


def test_member_login_success_is_not_audited_but_works(member) -> None:
    client = Client()
    sign_in(client, "ada", "pw-ada")
    assert signed_in(client)
    assert not events("iris.account.login.succeeded")


# -- sessions ------------------------------------------------------------------------------


def test_operator_session_is_short_and_member_session_keeps_two_weeks(operator, member) -> None:
    staff = Client()
    sign_in(staff, operator.username, password_of(operator))
    assert staff.session.get_expiry_age() == settings.IRIS_OPERATOR_SESSION_IDLE_SECONDS == 1800
    person = Client()
    sign_in(person, "ada", "pw-ada")
    assert person.session.get_expiry_age() == 14 * 24 * 3600


def test_operator_session_ends_ten_hours_after_sign_in(operator, monkeypatch) -> None:
    client = Client()
    signed_at = timezone.now()
    sign_in(client, operator.username, password_of(operator))
    assert client.get("/").status_code == 200

    # Nine hours later (active all along, so the idle timer never ran out): still in.
    later = FixedClock(signed_at + timedelta(hours=9))
    monkeypatch.setattr(accounts, "timezone", later)
    assert client.get("/").status_code == 200
    # The remaining hour caps the idle timer.
    later.at = signed_at + timedelta(hours=9, minutes=45)
    assert client.get("/").status_code == 200
    assert client.session.get_expiry_age() <= 15 * 60

    later.at = signed_at + timedelta(hours=10, seconds=1)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith(LOGIN)
    assert not signed_in(client)


def test_operator_session_without_sign_in_stamp_is_ended(operator) -> None:
    client = Client()
    sign_in(client, operator.username, password_of(operator))
    session = client.session
    del session[accounts.SESSION_LOGIN_AT]
    session.save()
    assert client.get("/").status_code == 302


# -- TOTP ----------------------------------------------------------------------------------


def test_totp_enrolment_shows_the_secret_and_confirms_with_a_code(operator, clock) -> None:
    client = Client()
    client.force_login(operator)
    page = client.get(SETUP)
    assert page.status_code == 200 and page["Cache-Control"].startswith("max-age=0")
    row = OperatorTotp.objects.get(user=operator)
    assert row.confirmed_at is None and row.secret_handle.startswith("vault://")
    secret = accounts._secret_of(row)
    html = page.content.decode()
    grouped = " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))
    assert grouped in html
    assert f"otpauth://totp/Iris:{operator.username}?secret={secret}" in html.replace("&amp;", "&")
    stored = VaultSecret.objects.get(id=row.secret_handle.removeprefix("vault://"))
    assert secret not in stored.ciphertext
    assert secret not in all_audit_text().upper()

    # The same secret until confirmed: a reload does not break what the app holds.
    assert grouped in client.get(SETUP).content.decode()

    wrong = client.post(SETUP, {"code": "000000" if code_at(secret, NOW) != "000000" else "1"})
    assert wrong.status_code == 200 and "That code is not right" in wrong.content.decode()
    assert not accounts.totp_is_enrolled(operator)

    right = client.post(SETUP, {"code": code_at(secret, NOW)})
    assert right.status_code == 302
    assert accounts.totp_is_enrolled(operator)
    assert "Two-step sign-in is on" in client.get(SETUP).content.decode()
    assert events("iris.account.totp.enrolled")


def test_members_cannot_enrol_totp(member) -> None:
    client = Client()
    client.force_login(member)
    assert client.get(SETUP).status_code == 403
    assert Client().get(SETUP).status_code == 302  # anonymous: to the login page


def test_enrolled_operator_needs_a_right_single_use_code(operator, clock) -> None:
    secret = enrol(operator, clock)  # used the code of NOW's step
    client = Client()
    response = sign_in(client, operator.username, password_of(operator))
    assert response.status_code == 302 and response["Location"] == CODE
    assert not signed_in(client)
    assert client.get("/").status_code == 302

    wrong = client.post(CODE, {"code": "12345x"})
    assert wrong.status_code == 200 and "That code is not right" in wrong.content.decode()
    assert not signed_in(client)
    (failed,) = events("iris.account.login.failed")
    assert failed.reason_code == "bad-code" and "12345x" not in all_audit_text()

    # The code enrolment used is spent, though still inside its window.
    replayed = client.post(CODE, {"code": code_at(secret, NOW)})
    assert replayed.status_code == 200 and not signed_in(client)

    fresh = code_at(secret, NOW, steps_ahead=1)
    right = client.post(CODE, {"code": fresh})
    assert right.status_code == 302 and right["Location"] == "/"
    assert signed_in(client)
    (succeeded,) = events("iris.account.login.succeeded")
    assert succeeded.reason_code == "totp"

    # Signed out and back in: the code that just worked is refused the second time.
    client.post("/accounts/logout/")
    sign_in(client, operator.username, password_of(operator))
    assert client.post(CODE, {"code": fresh}).status_code == 200
    assert not signed_in(client)


def test_the_code_step_keeps_next(operator, clock) -> None:
    secret = enrol(operator, clock)
    client = Client()
    client.post(
        LOGIN + "?next=/consent/",
        {"username": operator.username, "password": password_of(operator), "next": "/consent/"},
    )
    response = client.post(CODE, {"code": code_at(secret, NOW, 1)})
    assert response["Location"] == "/consent/"


def test_code_page_without_a_password_step_goes_back_to_login(db) -> None:
    response = Client().get(CODE)
    assert response.status_code == 302 and response["Location"] == LOGIN


def test_wrong_codes_count_toward_the_lockout(operator, clock) -> None:
    secret = enrol(operator, clock)
    client = Client()
    sign_in(client, operator.username, password_of(operator))
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post(CODE, {"code": "99999x"}).status_code == 200
    locked = client.post(CODE, {"code": "99999x"})
    assert locked.status_code == 429 and "Signing in is paused" in locked.content.decode()
    assert events("iris.account.login.locked_out")

    again = Client()
    response = sign_in(again, operator.username, password_of(operator))
    assert response.status_code == 429
    assert again.post(CODE, {"code": code_at(secret, NOW, 1)}).status_code == 302
    assert not signed_in(again)


def test_reset_totp_lets_the_operator_sign_in_by_password_and_enrol_again(operator, clock) -> None:
    enrol(operator, clock)
    handle = OperatorTotp.objects.get(user=operator).secret_handle
    out = io.StringIO()
    call_command("reset_totp", operator.username, stdout=out)
    assert "removed" in out.getvalue()
    assert not OperatorTotp.objects.exists()
    assert not VaultSecret.objects.filter(id=handle.removeprefix("vault://")).exists()
    assert events("iris.account.totp.reset")
    client = Client()
    sign_in(client, operator.username, password_of(operator))
    assert signed_in(client)
    assert client.get(SETUP).status_code == 200
