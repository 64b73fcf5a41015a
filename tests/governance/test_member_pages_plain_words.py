"""No member page shows a raw code: walk every member page, with the demo data, in each
state a member meets (paused, corrected, forgotten, a guess, off the record, an export on
its way), and look for any value of any enum a member page shows in its visible text.

The codes come from the enums themselves, so a new value is checked the day it is added;
and the vocabulary must have words for every one of them.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from consent.enums import (
    AdapterScope,
    CaptureMethod,
    Category,
    ConsentStatus,
    ConsentType,
    LegalBasis,
    OptOutCategory,
    OptOutStatus,
)
from consent.policy import ScopeMode
from consent.terms import current_terms
from dsar.enums import RequestKind, RequestState, VerificationMethod
from governance import vocabulary
from governance.principal import Principal
from inspection.enums import InspectionState, NoticeStatus
from memory import demo
from memory.enums import Lifecycle, Origin, ProvenanceKind, ScopeKind, SuppressionReason
from memory.models import MemoryEntry
from memory.services import (
    Correction,
    MemoryDraft,
    memory_correct,
    memory_forget,
    memory_pause,
    memory_write,
    off_the_record_set,
)

ENUMS = (
    Category,
    ScopeKind,
    Origin,
    Lifecycle,
    SuppressionReason,
    ProvenanceKind,
    ConsentType,
    OptOutCategory,
    CaptureMethod,
    ConsentStatus,
    OptOutStatus,
    LegalBasis,
    AdapterScope,
    ScopeMode,
    RequestKind,
    RequestState,
    VerificationMethod,
    InspectionState,
    NoticeStatus,
)

# Codes that are also plain English words, which the member's words use in sentences
# ("your work", "everything else", "legal matters"). Only one-word codes can be here:
# a code with a hyphen or an underscore is never English.
ENGLISH = frozenset(
    {
        "fact", "goal", "work", "family", "other", "identity", "relationship", "preference",
        "commitment", "medical", "legal", "safety", "financial", "spiritual", "sexual",
        "sexuality", "biometric", "profile", "session", "notebook", "tenant", "scene", "pose",
        "crisis", "active", "paused", "consent", "contract", "export", "delete", "access",
        "imported", "granted", "revoked", "completed", "failed", "cancelled", "expired",
        "appealed", "submitted", "verified", "requested", "closed", "denied", "queued",
        "sending", "delivered", "domain", "conversation", "assistant", "durable", "ephemeral",
        "suppressed",
    }
)  # fmt: skip

CODES: frozenset[str] = frozenset(str(v) for enum in ENUMS for v in enum) | frozenset(
    f"category:{c}" for c in Category
)


def _words_iris_uses() -> str:
    """Every sentence of the vocabulary and the consent terms, lower-cased: a code's
    spaced form found here is English there ("your gender identity"), not a leak."""
    texts: list[str] = [current_terms().text]
    for table in (*vocabulary.TABLES.values(), *vocabulary.HELP_TABLES.values()):
        texts.extend(table.values())
    for copy in (*vocabulary.CONSENT_COPY.values(), *vocabulary.OPT_OUT_COPY.values()):
        texts.extend((copy.label, copy.unlocks, copy.revoking))
    texts.extend(t.what for t in vocabulary.TOPICS.values())
    return " ".join(texts).lower()


def raw_patterns() -> dict[str, re.Pattern[str]]:
    patterns = {}
    english = _words_iris_uses()
    for code in CODES - ENGLISH:
        spaced = {code.replace("_", " "), code.replace("-", " ")} - {code}
        variants = {code} | {v for v in spaced if v not in english}
        alternatives = "|".join(re.escape(v) for v in sorted(variants))
        # Case-sensitive: a label may start a sentence with the same word ("Draft" is not
        # used, but a capitalised word is a word, the lowercase code is the stored value).
        patterns[code] = re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])")
    return patterns


class VisibleText(HTMLParser):
    """The text a person sees: no <script>, <style> or attribute values."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in {"script", "style", "title"}:
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style", "title"} and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = VisibleText()
    parser.feed(html)
    return re.sub(r"\s+", " ", " ".join(parser.parts))


def raw_codes_in(text: str) -> list[str]:
    return sorted(code for code, pattern in raw_patterns().items() if pattern.search(text))


def test_the_check_finds_what_a_member_must_never_read() -> None:
    for leaked in ("user-pause", "tombstoned", "superseded", "draft", "religion user redacted"):
        assert raw_codes_in(f"State: {leaked}."), leaked
    assert raw_codes_in("Forgotten, paused, your work, Likes and preferences.") == []


@pytest.mark.parametrize(
    ("table", "enum"),
    [
        ("topic", Category),
        ("scope", ScopeKind),
        ("origin", Origin),
        ("lifecycle", Lifecycle),
        ("suppression", SuppressionReason),
        ("provenance", ProvenanceKind),
        ("capture", CaptureMethod),
        ("legal_basis", LegalBasis),
        ("policy_scope", AdapterScope),
        ("policy_mode", ScopeMode),
        ("data_rights_kind", RequestKind),
        ("data_rights_state", RequestState),
    ],
)
def test_the_vocabulary_has_words_for_every_value(table, enum) -> None:
    assert set(vocabulary.TABLES[table]) == {str(v) for v in enum}
    for value in enum:
        assert raw_codes_in(vocabulary.label(table, value)) == []


def test_every_consent_and_opt_out_has_its_copy() -> None:
    assert set(vocabulary.CONSENT_COPY) == {str(t) for t in ConsentType}
    assert set(vocabulary.OPT_OUT_COPY) == {str(c) for c in OptOutCategory}
    assert set(vocabulary.CONSENT_STATUS_LABELS) == {
        str(s) for s in (*ConsentStatus, *OptOutStatus)
    }


def test_topic_choices_are_grouped_and_cover_every_topic_once() -> None:
    codes = [code for _, options in vocabulary.topic_choices() for code, _ in options]
    assert sorted(codes) == sorted(str(c) for c in Category)
    labels = [label for _, options in vocabulary.topic_choices() for _, label in options]
    assert raw_codes_in(" ".join(labels)) == []


@pytest.fixture
def demo_member(member, django_capture_on_commit_callbacks):
    """The demo member's data, then one of each state a member page can show."""
    demo.seed(tenant=member.tenant, member=member)
    principal = Principal(kind="member", id=member.public_id, tenant_id=member.tenant_id)
    entries = list(MemoryEntry.objects.filter(member=member, is_current=True).order_by("body"))
    paused, corrected, forgotten = entries[0], entries[1], entries[2]
    memory_pause(principal=principal, member=member, entry_id=paused.entry_id)
    memory_correct(
        principal=principal,
        member=member,
        entry_id=corrected.entry_id,
        correction=Correction(body="I live in Lisbon, near the river", category="spatial"),
    )
    memory_forget(principal=principal, member=member, entry_id=forgotten.entry_id)
    memory_write(
        principal=principal,
        member=member,
        draft=MemoryDraft(
            scope_kind="profile",
            scope_identifiers={"userId": str(member.public_id)},
            category="preference",
            body="I probably prefer mornings",
            origin="model-inferred",
        ),
    )
    off_the_record_set(principal=principal, member=member, enabled=True)
    return member, {"paused": paused, "corrected": corrected, "forgotten": forgotten}


def member_pages(entries) -> list[str]:
    pages = [
        reverse("home"),
        reverse("memory:home"),
        reverse("consent:home"),
        reverse("dsar:home"),
        reverse("approvals"),
        reverse("inspection:mine"),
        "/no-such-page/",
    ]
    for entry in entries.values():
        pages.append(reverse("memory:detail", kwargs={"entry_id": entry.entry_id}))
    for name in ("paused", "corrected"):
        for view in ("memory:edit", "memory:forget"):
            pages.append(reverse(view, kwargs={"entry_id": entries[name].entry_id}))
    return pages


def test_no_member_page_shows_a_raw_code(client, demo_member, django_capture_on_commit_callbacks):
    member, entries = demo_member
    client.force_login(member)
    with django_capture_on_commit_callbacks(execute=True):
        filed = client.post(
            reverse("dsar:file_export"), {"export-include_consents": "on"}, follow=True
        )
    assert filed.status_code == 200
    found = {}
    texts = {}
    for url in member_pages(entries):
        response = client.get(url)
        assert response.status_code in {200, 404}, url
        texts[url] = visible_text(response.content.decode())
        codes = raw_codes_in(texts[url])
        if codes:
            found[url] = codes
    assert found == {}

    # The walk met the states it claims to, in words.
    def detail(name: str) -> str:
        return texts[reverse("memory:detail", kwargs={"entry_id": entries[name].entry_id})]

    assert vocabulary.SUPPRESSION_LABELS["user-pause"] in detail("paused")
    assert vocabulary.LIFECYCLE_LABELS["superseded"] in detail("corrected")
    assert "Forgotten" in detail("forgotten")
    assert "Not confirmed" in texts[reverse("memory:home")]
    assert vocabulary.DATA_RIGHTS_KIND_LABELS["export"] in texts[reverse("dsar:home")]
    assert "Recorded by Iris, not by you" in texts[reverse("consent:home")]
    assert all("You are off the record." in text for text in texts.values())
