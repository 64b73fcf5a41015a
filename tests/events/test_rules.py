"""The webhook rules without a database: URLs, signatures, the retry schedule."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.rules import RetryPolicy, check_event_types, check_url, host_allowed, signature, verify
from governance.rules import RuleError

ALLOWED = ("hooks.example.com", ".partner.test", "127.0.0.1", "localhost")

URL_CASES = [
    # (url, http_loopback, rule or None)
    ("https://hooks.example.com/iris", False, None),
    ("https://a.partner.test/x", False, None),
    ("https://partner.test/x", False, None),
    ("https://HOOKS.example.com:8443/iris", False, None),
    ("http://127.0.0.1:8000/hook", True, None),
    ("http://localhost/hook", True, None),
    ("http://127.0.0.1:8000/hook", False, "https-required"),
    ("http://hooks.example.com/iris", True, "https-required"),
    ("https://evil.example.org/iris", False, "host-not-allowed"),
    ("https://hooks.example.com.evil.org/", False, "host-not-allowed"),
    ("https://notpartner.test/", False, "host-not-allowed"),
    ("https://user:pw@hooks.example.com/", False, "no-credentials"),
    ("https://hooks.example.com/#frag", False, "no-fragment"),
    ("ftp://hooks.example.com/", False, "invalid"),
    ("hooks.example.com/iris", False, "invalid"),
    ("", False, "required"),
    ("https://hooks.example.com/" + "a" * 600, False, "max_length"),
]


@pytest.mark.parametrize(("url", "loopback", "rule"), URL_CASES)
def test_a_webhook_url_is_checked_against_every_rule(url, loopback, rule) -> None:
    if rule is None:
        target = check_url(url, allowed_hosts=ALLOWED, http_loopback=loopback)
        assert target.host == target.host.lower()
        return
    with pytest.raises(RuleError) as caught:
        check_url(url, allowed_hosts=ALLOWED, http_loopback=loopback)
    assert caught.value.field == "url"
    assert caught.value.rule == rule


def test_an_empty_allow_list_allows_nothing() -> None:
    assert not host_allowed("hooks.example.com", [])
    with pytest.raises(RuleError):
        check_url("https://hooks.example.com/", allowed_hosts=(), http_loopback=False)


def test_event_types_are_known_names_without_repeats() -> None:
    known = ("memory.written", "recall.completed")
    assert check_event_types("memory.written,recall.completed,memory.written", known) == known
    for bad in ([], "", ["memory.read"], 7):
        with pytest.raises(RuleError) as caught:
            check_event_types(bad, known)
        assert caught.value.field == "eventTypes"


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    body = b'{"id":"x"}'
    expected = hmac.new(b"whsec_k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature("whsec_k", 1700000000, body) == f"v1={expected}"


@given(secret=st.text(min_size=1), body=st.binary(), ts=st.integers(0, 2**40))
def test_a_signature_verifies_and_any_change_breaks_it(secret, body, ts) -> None:
    header = signature(secret, ts, body)
    assert verify(secret, timestamp=str(ts), header=header, body=body, now=ts)
    assert not verify(secret, timestamp=str(ts), header=header, body=body + b" ", now=ts)
    assert not verify(secret + "x", timestamp=str(ts), header=header, body=body, now=ts)
    assert not verify(secret, timestamp=str(ts + 1), header=header, body=body, now=ts)


def test_an_old_or_future_timestamp_is_refused() -> None:
    header = signature("s", 1000, b"{}")
    assert verify("s", timestamp="1000", header=header, body=b"{}", now=1300)
    assert not verify("s", timestamp="1000", header=header, body=b"{}", now=1301)
    assert not verify("s", timestamp="1000", header=header, body=b"{}", now=699)
    assert not verify("s", timestamp="soon", header=header, body=b"{}", now=1000)


def test_the_default_retry_schedule_doubles_from_thirty_seconds() -> None:
    assert RetryPolicy().schedule() == (30.0, 60.0, 120.0, 240.0, 480.0)
    assert RetryPolicy(max_attempts=1).schedule() == ()
    assert RetryPolicy(max_attempts=12).schedule()[-1] == 3600.0


@given(attempts=st.integers(1, 30), first=st.floats(1, 600), factor=st.floats(1, 4))
def test_waits_never_shrink_and_never_pass_the_cap(attempts, first, factor) -> None:
    policy = RetryPolicy(max_attempts=attempts, first_delay=first, factor=factor)
    waits = policy.schedule()
    assert len(waits) == attempts - 1
    assert all(a <= b for a, b in zip(waits, waits[1:], strict=False))
    assert all(w <= policy.max_delay for w in waits)
