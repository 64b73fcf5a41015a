"""The conflict ladder for memory writes (spec: "Conflict Resolution").

Pure rules: no Django, no database. When a write shares a conflict key with a stored
memory, `resolve_conflict` decides which assertion stands, names the rule that decided it,
and says whether the member must be asked before anything changes. Decisions are written
down in docs/decisions/memory.md.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Literal

from memory.enums import Origin

KEY_SEPARATOR = "::"

Winner = Literal["prior", "incoming"]


class ConflictRule(StrEnum):
    """Stable rule codes; they go into the audit chain, so never rename one."""

    OPERATOR_NEVER_TRUMPS_MEMBER = "operator-never-trumps-member"
    EXPLICIT_BEATS_INFERRED = "explicit-beats-inferred"
    CONFIRMED_BEATS_INFERRED = "confirmed-beats-inferred"
    MOST_RECENT_WINS = "most-recent-wins"


class Authority(StrEnum):
    """How much weight an origin carries in a conflict (the spec's "source kind")."""

    EXPLICIT = "explicit"  # the member said it
    CONFIRMED = "confirmed"  # the member confirmed an inference
    OPERATOR = "operator"  # an operator's copilot inferred it
    INFERRED = "inferred"  # the model, a summary or an import produced it


ORIGIN_AUTHORITY: dict[Origin, Authority] = {
    Origin.USER_STATED: Authority.EXPLICIT,
    Origin.USER_CONFIRMED: Authority.CONFIRMED,
    Origin.OPERATOR_COPILOT: Authority.OPERATOR,
    Origin.MODEL_INFERRED: Authority.INFERRED,
    # A summary is derived text, not the member's words, even when the turns were.
    Origin.SUMMARIZED_FROM_SESSION: Authority.INFERRED,
    # Imported content is external and untrusted until the member confirms it.
    Origin.IMPORTED: Authority.INFERRED,
}

_MEMBER_WORD = frozenset({Authority.EXPLICIT, Authority.CONFIRMED})
_NOT_MEMBER_WORD = frozenset({Authority.OPERATOR, Authority.INFERRED})


def authority_of(origin: Origin | str) -> Authority:
    return ORIGIN_AUTHORITY[Origin(origin)]


@dataclass(frozen=True)
class ConflictSide:
    """One assertion in a conflict: who made it, what it says, and when."""

    origin: Origin
    body: str
    updated_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "origin", Origin(self.origin))
        if self.updated_at.tzinfo is None or self.updated_at.utcoffset() is None:
            raise ValueError("updated_at must be timezone-aware")

    @property
    def authority(self) -> Authority:
        return ORIGIN_AUTHORITY[self.origin]


@dataclass(frozen=True)
class ConflictResolution:
    """`winner` is what the ladder picks. When `ask_member` is true the write is held and
    the member's answer ("you mentioned X earlier — should I update?") decides instead."""

    winner: Winner
    rule: ConflictRule
    ask_member: bool


def _ladder(prior: Authority, incoming: Authority) -> tuple[Winner | None, ConflictRule]:
    # Rule 1: an operator's copilot never overwrites what the member said or confirmed.
    if incoming is Authority.OPERATOR and prior in _MEMBER_WORD:
        return "prior", ConflictRule.OPERATOR_NEVER_TRUMPS_MEMBER
    # Rule 2: the member's own statement beats any inferred source, in either direction.
    if prior is Authority.EXPLICIT and incoming in _NOT_MEMBER_WORD:
        return "prior", ConflictRule.EXPLICIT_BEATS_INFERRED
    if incoming is Authority.EXPLICIT and prior in _NOT_MEMBER_WORD:
        return "incoming", ConflictRule.EXPLICIT_BEATS_INFERRED
    # Rule 3: a confirmed fact beats inference; a prior confirmed fact is kept.
    if prior is Authority.CONFIRMED and incoming in _NOT_MEMBER_WORD:
        return "prior", ConflictRule.CONFIRMED_BEATS_INFERRED
    if incoming is Authority.CONFIRMED and prior in _NOT_MEMBER_WORD:
        return "incoming", ConflictRule.CONFIRMED_BEATS_INFERRED
    # Rule 4: equal authority (stated vs confirmed counts as equal: both are the member's
    # word; operator vs model counts as equal: neither is).
    return None, ConflictRule.MOST_RECENT_WINS


def resolve_conflict(prior: ConflictSide, incoming: ConflictSide) -> ConflictResolution:
    winner, rule = _ladder(prior.authority, incoming.authority)
    if winner is None:
        # A tie goes to the incoming write: it is the one being asserted now. An older
        # incoming write (a late sync from an offline device) loses to what is stored.
        winner = "incoming" if incoming.updated_at >= prior.updated_at else "prior"
    return ConflictResolution(
        winner=winner,
        rule=rule,
        ask_member=_conflict_matters(prior, incoming, winner),
    )


def _conflict_matters(prior: ConflictSide, incoming: ConflictSide, winner: Winner) -> bool:
    """A conflict matters when the member's own word is at stake and the value changes.

    - the member's stated or confirmed fact would be replaced by a different value they
      stated or confirmed: ask before overwriting ("you mentioned X earlier — update?");
    - a model inference (or summary, or import) contradicts what the member stated or
      confirmed: the fact is kept, and the inference is offered for confirmation instead
      of being dropped or stored silently.
    Never asked: the same value restated; an inference replacing an inference; the member
    replacing a guess; an operator's copilot contradicting the member (the copilot note is
    simply not applied — operator notes are not shown to members through this path).
    """
    if same_value(prior.body, incoming.body):
        return False
    if prior.authority not in _MEMBER_WORD:
        return False
    if incoming.authority in _MEMBER_WORD:
        return winner == "incoming"
    return incoming.authority is Authority.INFERRED


# --- values, subjects and keys ---------------------------------------------------------

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*|[:=]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

# Words that start a statement without naming what it is about.
_LEADING_FILLER = frozenset(
    "a an the my our your his her their its i we me it this that these those i'm".split()
)
# Where "<subject> is <value>" splits. ":" and "=" cover "Favourite colour: blue".
_COPULAS = frozenset("is are was were am : =".split())
_FALLBACK_STOPWORDS = (
    _LEADING_FILLER
    | _COPULAS
    | frozenset("and or but so to of in on at for with really very just also be been".split())
)
SUBJECT_MAX_TOKENS = 4
# The copula must come early; later ones belong to clauses, not to the subject.
_COPULA_WINDOW = 6


def _normalise_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(_normalise_text(text).translate(_APOSTROPHES))


def same_value(a: str, b: str) -> bool:
    """Equal after case, width and spacing are normalised and punctuation is ignored."""
    return _tokens(a) == _tokens(b)


def normalise_subject(subject: str) -> str:
    return _normalise_text(subject)


def derive_subject(body: str) -> str:
    """The subject of a memory whose surface did not name one. Deterministic.

    1. Normalise (NFKC, casefold, spacing) and split into word tokens.
    2. If a copula (is/are/was/were/am, ":" or "=") occurs within the first six tokens,
       the subject is what precedes it, minus leading fillers ("my", "the", "i", ...):
       "My favourite colour is blue" -> "favourite colour".
    3. Otherwise (or if that leaves nothing, as in "I am vegan"), the subject is the first
       four tokens that are not stopwords: "I live in Berlin" -> "live berlin".
    Either way at most four tokens. The fallback errs towards distinct subjects on purpose:
    a too-coarse subject would make recall's dedupe hide a different memory, which is
    worse than missing a conflict. Surfaces that know the subject should send it.
    """
    tokens = _tokens(body)
    for index, token in enumerate(tokens[:_COPULA_WINDOW]):
        if token in _COPULAS:
            head = tokens[:index]
            while head and head[0] in _LEADING_FILLER:
                head = head[1:]
            if head:
                return " ".join(head[:SUBJECT_MAX_TOKENS])
            break
    content = [token for token in tokens if token not in _FALLBACK_STOPWORDS]
    return " ".join(content[:SUBJECT_MAX_TOKENS])


def conflict_key(category: str | None, actor_handle: str | None, subject: str | None) -> str:
    """`category::actorHandle::subject`, empty for a missing part; the subject normalised.

    Category is an enum value and a handle is `actor_<hex>`, so neither contains "::" and
    the key splits unambiguously even if a subject does.
    """
    return KEY_SEPARATOR.join(
        (
            str(category or ""),
            actor_handle or "",
            normalise_subject(subject) if subject else "",
        )
    )
