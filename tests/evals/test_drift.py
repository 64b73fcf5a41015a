"""Drift-detection suite (spec: "memory-recall accuracy, false-recall rate,
sensitive-category leakage rate"): a labelled synthetic set, recalled through the API with
the deployed ranker, scored, printed, and held to thresholds. A change to ranking, gating
or the embedding model that moves these figures past a threshold fails the build; the
figures of every run are in the session summary (and docs/assurance.md).

Labels: each question is written from its own template, never from the memory's text;
an answerable question's label is the one memory of its topic; an unanswerable question
(a topic nobody mentioned) has none; a sensitive topic asked outside its contexts must
return nothing sensitive.

- recall accuracy: answerable questions whose labelled memory is ranked first;
- false-recall rate: returned entries that are not the question's labelled memory, over
  all entries returned (with the turn's limit of 3);
- sensitive leakage rate: sensitive entries returned outside their contexts, over the
  recalls that could have leaked one. Exactly 0, always.
"""

from __future__ import annotations

import random

import pytest

from memory.recall.pipeline import SENSITIVE_CONTEXTS, SURFACING_CONTEXTS
from tests.evals.generators import (
    SENSITIVE_TOPICS,
    UNANSWERABLE,
    facts,
    renamed,
)
from tests.evals.support import ask, recalled, remember
from tests.factories import grant_category, grant_storage

pytestmark = pytest.mark.django_db

SEED = 2609
LIMIT = 3
# Thresholds, with a margin under the figures of the reference run (docs/assurance.md).
MIN_ACCURACY = 0.95
MAX_FALSE_RECALL = 0.2
MAX_SENSITIVE_LEAKAGE = 0.0


def test_recall_quality_on_the_labelled_set(
    ready, other_member, surface_api, settings, metric
) -> None:
    settings.IRIS_RECALL_SEMANTIC = "hybrid"  # the deployed default, named so it is pinned
    rng = random.Random(SEED)
    members = [ready, other_member]
    grant_storage(other_member)
    labelled: dict = {}
    for member in members:
        for topic in SENSITIVE_TOPICS:
            grant_category(member, topic.category)
        standard = [renamed(f, rng) for f in facts(rng, str(member.pk))]
        sensitive = [renamed(f, rng) for f in facts(rng, str(member.pk), SENSITIVE_TOPICS)]
        ids = {f.key: remember(surface_api, member, f) for f in standard + sensitive}
        labelled[member.pk] = (standard, sensitive, ids)

    answerable = first_right = returned = wrong = 0
    sensitive_probes = sensitive_leaks = 0
    sensitive_in_context = sensitive_found = 0
    for member in members:
        standard, sensitive, ids = labelled[member.pk]
        sensitive_ids = {ids[f.key] for f in sensitive}
        for fact in standard:
            got = recalled(ask(surface_api, member, fact.question, limit=LIMIT))
            answerable += 1
            first_right += bool(got) and got[0] == ids[fact.key]
            returned += len(got)
            wrong += sum(1 for g in got if g != ids[fact.key])
        for question in UNANSWERABLE:
            got = recalled(ask(surface_api, member, question, limit=LIMIT))
            returned += len(got)
            wrong += len(got)
        for fact in sensitive:
            for context in sorted(SURFACING_CONTEXTS):
                got = recalled(
                    ask(surface_api, member, fact.question, context=context, limit=LIMIT)
                )
                outside = [
                    g
                    for g in got
                    if g in sensitive_ids
                    and context not in SENSITIVE_CONTEXTS[_category(sensitive, ids, g)]
                ]
                sensitive_probes += 1
                sensitive_leaks += len(outside)
                if context in fact.contexts:
                    sensitive_in_context += 1
                    sensitive_found += bool(got) and got[0] == ids[fact.key]

    accuracy = first_right / answerable
    false_recall = wrong / max(1, returned)
    leakage = sensitive_leaks / sensitive_probes
    metric(
        "drift",
        ranker="hybrid",
        recall_accuracy=accuracy,
        false_recall_rate=false_recall,
        sensitive_leakage_rate=leakage,
        sensitive_accuracy_in_context=sensitive_found / sensitive_in_context,
        answerable=answerable,
        unanswerable=len(UNANSWERABLE) * len(members),
        sensitive_probes=sensitive_probes,
        min_accuracy=MIN_ACCURACY,
        max_false_recall=MAX_FALSE_RECALL,
        seed=SEED,
    )
    assert leakage == MAX_SENSITIVE_LEAKAGE
    assert accuracy >= MIN_ACCURACY, accuracy
    assert false_recall <= MAX_FALSE_RECALL, false_recall


def _category(sensitive, ids, entry_id: str) -> str:
    return next(f.category for f in sensitive if ids[f.key] == entry_id)
