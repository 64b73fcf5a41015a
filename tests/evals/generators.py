"""Synthetic data for the evaluation suites: seeded, so every run sees the same world.

A `Fact` is one memory a member states, with a question it answers (a paraphrase, never
its own sentence), the surfacing context it may appear in, and a canary: a made-up word
that occurs in this memory's text and nowhere else, so a test can search any answer,
file or table for it and know exactly what leaked.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

# The suites' fixed clock.
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Topic:
    name: str
    category: str
    body: str  # `{c}` is where the canary goes
    question: str
    contexts: frozenset[str] = frozenset({"general"})


# Everyday topics: each sentence has words of its own, each question shares one or two of
# them and paraphrases the rest.
STANDARD_TOPICS: tuple[Topic, ...] = (
    Topic(
        "coffee",
        "preference",
        "I drink my coffee black every morning at the {c} cafe",
        "how do I take my morning coffee",
    ),
    Topic("dog", "fact", "My dog is a beagle called {c}", "what is my dog called"),
    Topic(
        "city",
        "fact",
        "I moved to Lisbon for a job at {c} bakery",
        "which city did I move to for work",
    ),
    Topic(
        "sport",
        "preference",
        "I play tennis on Saturdays with the {c} club",
        "which sport do I play at the weekend",
    ),
    Topic(
        "band",
        "preference",
        "My favourite band is {c} and I saw them live twice",
        "what is my favourite band",
    ),
    Topic(
        "birthday",
        "fact",
        "My birthday is on the ninth of May, at the {c} restaurant",
        "when is my birthday",
    ),
    Topic(
        "language",
        "goal",
        "I am learning Japanese with a tutor named {c}",
        "which language am I learning",
    ),
    Topic(
        "trip",
        "goal",
        "Next summer I want to hike in Patagonia with {c} tours",
        "where do I want to go hiking next summer",
    ),
    Topic("car", "fact", "I drive an old green Volvo I bought from {c}", "what car do I drive"),
    Topic(
        "book",
        "preference",
        "I am reading a novel by {c} about lighthouses",
        "which novel am I reading",
    ),
)

HEALTH = frozenset({"health", "safety", "crisis"})

# Sensitive topics, each in a sensitive category with the contexts the recall gate allows
# (memory.recall.pipeline.SENSITIVE_CONTEXTS; the suites check against that table).
SENSITIVE_TOPICS: tuple[Topic, ...] = (
    Topic(
        "medication",
        "medical",
        "I take lisinopril for my blood pressure, from Dr {c}",
        "which medication do I take for blood pressure",
        HEALTH,
    ),
    Topic(
        "therapy",
        "mental_health",
        "I see a therapist called {c} about my anxiety",
        "who is my therapist for anxiety",
        HEALTH,
    ),
    Topic(
        "debt",
        "financial",
        "I owe eight thousand on the {c} credit card",
        "how much do I owe on my credit card",
        frozenset({"financial", "safety", "crisis"}),
    ),
    Topic(
        "faith",
        "spiritual",
        "I pray at the {c} temple every Friday",
        "where do I go to pray",
        frozenset({"spiritual"}),
    ),
    Topic(
        "visa",
        "immigration_status",
        "My work visa from the {c} agency expires in June",
        "when does my work visa expire",
        frozenset({"legal", "safety", "crisis"}),
    ),
)

# Questions about things no member ever said: anything recalled for them is a false recall.
UNANSWERABLE: tuple[str, ...] = (
    "what is my shoe size",
    "which school did my children attend",
    "what is the licence plate of my motorbike",
    "which piano teacher do I have",
    "what flavour of ice cream do I hate",
    "which bank holds my mortgage",
)


def canary(rng: random.Random) -> str:
    """A made-up word: letters then digits, one token to every ranker, found nowhere else."""
    letters = "".join(rng.choice(string.ascii_lowercase) for _ in range(7))
    return f"Q{letters}{rng.randrange(1000, 9999)}"


@dataclass(frozen=True)
class Fact:
    key: str  # "<owner>/<topic>", a stable label
    topic: str
    category: str
    body: str
    question: str
    canary: str
    contexts: frozenset[str]

    @property
    def sensitive(self) -> bool:
        return self.contexts != frozenset({"general"})


def facts(
    rng: random.Random, owner: str, topics: tuple[Topic, ...] = STANDARD_TOPICS
) -> list[Fact]:
    """One fact per topic for `owner`, each with a fresh canary."""
    made = []
    for topic in topics:
        word = canary(rng)
        made.append(
            Fact(
                key=f"{owner}/{topic.name}",
                topic=topic.name,
                category=topic.category,
                body=topic.body.format(c=word),
                question=topic.question,
                canary=word,
                contexts=topic.contexts,
            )
        )
    return made


def renamed(fact: Fact, rng: random.Random) -> Fact:
    """The same fact with another canary (another member who says the same kind of thing)."""
    word = canary(rng)
    return replace(fact, body=fact.body.replace(fact.canary, word), canary=word)


@dataclass(frozen=True)
class Moment:
    """A point on a synthetic timeline: days after T0, and references made then."""

    day: float
    references: int = 0

    @property
    def at(self) -> datetime:
        return T0 + timedelta(days=self.day)


def timeline(rng: random.Random, length: int, horizon_days: int) -> list[Moment]:
    """`length` moments in increasing time within `horizon_days`, each with 0-3 references."""
    days = sorted(rng.uniform(0, horizon_days) for _ in range(length))
    return [Moment(round(d, 3), rng.randrange(0, 4)) for d in days]
