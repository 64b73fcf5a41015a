"""BM25 lexical scoring over memory bodies. Pure Python, no Django, no third-party packages.

Tokeniser (`terms`), the same for documents and queries:

1. Unicode NFKC, then case-folded (so "Straße" and "STRASSE" meet, full-width digits are
   digits);
2. split into runs of letters and digits (`[^\\W_]+`); an apostrophe splits too, and the
   "s" or "t" it leaves behind is dropped with the other one-letter words;
3. English stop words (`STOP_WORDS`: pronouns, articles, auxiliaries, prepositions) and
   one-letter words are dropped; digits are kept whatever their length ("7", "2019");
4. a light suffix stemmer (`stem`) folds inflections: plural -s/-es/-ies, -ed, -ing and a
   final silent -e, so "moved", "moves", "moving" and "move" are one term. It is deliberately
   weaker than Porter's: it never touches derivations ("bakery" stays apart from "bake"),
   which keeps near-duplicate memories apart.

Scoring is Okapi BM25 with Lucene's non-negative idf, `ln(1 + (N - df + 0.5) / (df + 0.5))`,
k1 = 1.2, b = 0.75. Query terms count once each (a repeated word is no stronger).

`normalise` maps a BM25 score into [0, 1) for blending with other signals: it divides by the
score's supremum for that query, `sum(idf(t) * (k1 + 1))` (every term present with unbounded
frequency). It depends only on the query and the corpus statistics, never on the other
candidates, so a recall that scores a subset of rows gives each row the same value as one
that scores them all.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, KeysView, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

K1 = 1.2
B = 0.75

_WORD = re.compile(r"[^\W_]+")

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also ever get got
    im ive id dont didnt doesnt isnt wasnt arent werent wont cant couldnt wouldnt shouldnt
    isn aren wasn weren don doesn didn won couldn wouldn shouldn hasn haven hadn ll ve re
    """.split()
)


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Fold common English inflections; leaves short words, digits and derivations alone.

    Memoised: recall stems every word of every fetched body, and a member's vocabulary is
    small next to the number of words it stems."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith(("xes", "ches", "shes", "zzes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ied") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("eed"):
        pass  # "need", "agreed": the e is part of the stem
    elif word.endswith("ed") and len(word) > 4 and _has_vowel(word[:-2]):
        word = _undouble(word[:-2])
    elif word.endswith("ing") and len(word) > 5 and _has_vowel(word[:-3]):
        word = _undouble(word[:-3])
    if word.endswith("e") and len(word) > 3 and not word.endswith(("ee", "ie")):
        word = word[:-1]
    return word


def _has_vowel(text: str) -> bool:
    return any(ch in "aeiouy" for ch in text)


def _undouble(stem_: str) -> str:
    # "running" → "run", "planned" → "plan"; but "fall", "miss", "buzz" keep theirs.
    if len(stem_) > 2 and stem_[-1] == stem_[-2] and stem_[-1] not in "lsz":
        return stem_[:-1]
    return stem_


def terms(text: str) -> list[str]:
    """The terms of `text` in order, with repeats (see the module docstring for the rules)."""
    out: list[str] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        if word in STOP_WORDS or (len(word) == 1 and not word.isdigit()):
            continue
        out.append(stem(word))
    return out


def fragments(query: Iterable[str]) -> list[str]:
    """Substrings of which every plain-ASCII word whose term is in `query` holds one.

    `stem` only cuts a word short, except that "-ies"/"-ied" become "y": a term, less a
    final "y", is a substring of each word it stems from. A fragment inside another is
    implied by it; only the shorter is kept."""
    return shortest(t[:-1] if t.endswith("y") and len(t) > 1 else t for t in query)


def shortest(fragments: Iterable[str]) -> list[str]:
    """The fragments not implied by another (one inside another is), sorted."""
    frags = set(fragments)
    return sorted(f for f in frags if not any(o != f and o in f for o in frags))


def query_terms(text: str) -> tuple[str, ...]:
    """A query's distinct terms, in first-seen order (deterministic iteration)."""
    return tuple(dict.fromkeys(terms(text)))


@dataclass(frozen=True, slots=True)
class CorpusStats:
    """What BM25 needs to know about the corpus a document is scored against."""

    document_count: int
    average_length: float
    document_frequency: Mapping[str, int]
    k1: float = K1
    b: float = B

    def idf(self, term: str) -> float:
        df = self.document_frequency.get(term, 0)
        return math.log(1.0 + (self.document_count - df + 0.5) / (df + 0.5))

    def upper_bound(self, query: Iterable[str]) -> float:
        """The supremum of the BM25 score of `query` (distinct terms) over any document."""
        return sum(self.idf(t) for t in query) * (self.k1 + 1.0)

    def score_counts(self, query: Iterable[str], counts: Mapping[str, int], length: int) -> float:
        """BM25 of a document given its term counts and length (in terms)."""
        if not counts:
            return 0.0
        k1, b = self.k1, self.b
        norm = k1 * (1.0 - b + b * length / self.average_length) if self.average_length else k1
        total = 0.0
        for term in query:
            tf = counts.get(term, 0)
            if tf:
                total += self.idf(term) * tf * (k1 + 1.0) / (tf + norm)
        return total

    def score_text(self, query: str, text: str) -> float:
        doc = terms(text)
        return self.score_counts(query_terms(query), Counter(doc), len(doc))

    def normalise(self, score: float, query: Iterable[str]) -> float:
        """`score` divided by the query's supremum: in [0, 1), order-preserving."""
        upper = self.upper_bound(query)
        return score / upper if upper > 0.0 else 0.0


class Bm25Index:
    """An immutable BM25 index over `{doc_id: text}` with an inverted index for search."""

    __slots__ = ("_counts", "_lengths", "_postings", "stats")

    def __init__(
        self,
        documents: Mapping[str, str] | Iterable[tuple[str, str]],
        *,
        k1: float = K1,
        b: float = B,
    ) -> None:
        items = documents.items() if isinstance(documents, Mapping) else documents
        counts: dict[str, Counter[str]] = {}
        lengths: dict[str, int] = {}
        postings: dict[str, list[tuple[str, int]]] = {}
        for doc_id, text in items:
            if doc_id in counts:
                raise ValueError(f"duplicate document id {doc_id!r}")
            doc_terms = terms(text)
            tf = Counter(doc_terms)
            counts[doc_id] = tf
            lengths[doc_id] = len(doc_terms)
            for term, n in tf.items():
                postings.setdefault(term, []).append((doc_id, n))
        total = sum(lengths.values())
        self._counts = counts
        self._lengths = lengths
        self._postings = postings
        self.stats = CorpusStats(
            document_count=len(counts),
            average_length=total / len(counts) if counts else 0.0,
            document_frequency=MappingProxyType({t: len(p) for t, p in postings.items()}),
            k1=k1,
            b=b,
        )

    def __len__(self) -> int:
        return len(self._counts)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._counts

    def document_ids(self) -> KeysView[str]:
        return self._counts.keys()

    def document_frequency(self, term: str) -> int:
        return self.stats.document_frequency.get(term, 0)

    def score(self, query: str, doc_id: str) -> float:
        """BM25 of document `doc_id` for `query` (KeyError for an unknown id)."""
        return self.stats.score_counts(
            query_terms(query), self._counts[doc_id], self._lengths[doc_id]
        )

    def normalised_score(self, query: str, doc_id: str) -> float:
        q = query_terms(query)
        return self.stats.normalise(
            self.stats.score_counts(q, self._counts[doc_id], self._lengths[doc_id]), q
        )

    def scores(self, query: str) -> dict[str, float]:
        """BM25 of every document sharing a term with `query`; absent ids score 0."""
        stats = self.stats
        k1, b, avg = stats.k1, stats.b, stats.average_length
        lengths = self._lengths
        out: dict[str, float] = {}
        for term in query_terms(query):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = stats.idf(term)
            for doc_id, tf in posting:
                norm = k1 * (1.0 - b + b * lengths[doc_id] / avg)
                out[doc_id] = out.get(doc_id, 0.0) + idf * tf * (k1 + 1.0) / (tf + norm)
        return out

    def normalised_scores(self, query: str) -> dict[str, float]:
        """`scores` mapped into [0, 1) by `CorpusStats.normalise`."""
        upper = self.stats.upper_bound(query_terms(query))
        if upper <= 0.0:
            return {}
        return {doc_id: s / upper for doc_id, s in self.scores(query).items()}

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The `k` best documents, score descending then id ascending (deterministic)."""
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return ranked[:k]
