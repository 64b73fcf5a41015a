"""Each revision stores its recall words, and they are exactly what the tokenisers give:
a member's snapshot is built from them instead of from the bodies."""

from __future__ import annotations

import importlib
from collections import Counter
from types import SimpleNamespace

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from memory.models import WORDS_SPLIT, MemoryEntry, recall_words
from memory.recall.pipeline import tokens
from memory.rules.lexical import terms
from memory.services import memory_write
from tests.factories import as_member, draft, grant_storage

BODIES = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=200
) | st.sampled_from(
    [
        "I moved to Lisbon in 2019 and moved again",
        "Straße STRASSE strasse",
        "ｆｕｌｌ width ２０２６",
        "don't won't it's the cat's toys",
        "the and of",
        "naïve café crème brûlée",
        "a|b c|d under_score",
    ]
)


def _parsed(stored: str) -> tuple[Counter[str], frozenset[str]]:
    lexical, split, jaccard = stored.partition(WORDS_SPLIT)
    assert split == WORDS_SPLIT
    return Counter(lexical.split()), frozenset(jaccard.split())


@given(BODIES)
def test_stored_words_are_the_tokenisers_terms_with_their_counts(body: str) -> None:
    counts, jaccard = _parsed(recall_words(body))
    assert counts == Counter(terms(body))
    assert jaccard == tokens(body)
    # One mark only: neither tokeniser keeps it inside a word.
    assert recall_words(body).count(WORDS_SPLIT) == 1


@pytest.mark.django_db
def test_a_written_revision_stores_its_recall_words(member) -> None:
    grant_storage(member)
    entry = memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, "Walked the dogs; walking dogs is fun"),
    ).entry
    stored = MemoryEntry.objects.get(pk=entry.pk).recall_words
    assert stored == recall_words("Walked the dogs; walking dogs is fun")
    counts, _ = _parsed(stored)
    assert counts["dog"] == 2 and counts["walk"] == 2


@pytest.mark.django_db
def test_the_migration_fills_rows_written_before_the_column(member) -> None:
    grant_storage(member)
    entry = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "Tea at five")
    ).entry
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_memoryentry SET recall_words = NULL WHERE revision_id = %s",
            [entry.pk if connection.vendor == "postgresql" else entry.pk.hex],
        )
    assert MemoryEntry.objects.get(pk=entry.pk).recall_words is None
    migration = importlib.import_module("memory.migrations.0011_recall_words")
    from django.apps import apps

    migration.backfill(apps, SimpleNamespace(connection=connection))
    assert MemoryEntry.objects.get(pk=entry.pk).recall_words == recall_words("Tea at five")
