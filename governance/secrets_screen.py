"""The secret screen: what looks like a credential in free text (spec 003, "Secrets as
handles"; issue 5 item 2).

Pure rules: no Django. `find_secrets` names each credential and where it sits, never what
it is; `redact_secrets` replaces each with `[redacted:<kind>]`. The screen prefers missing
an odd password to refusing ordinary prose, so every generic detector needs either a
keyword in front (`password:`, `api_key=`, `Bearer`) or a value that looks random, and the
vendor detectors need the vendor's prefix. The corpus in
`tests/governance/corpus/secrets_*.txt` is the contract; add a line there before changing a
pattern here.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A credential found in a text: its kind and its span. Never its value."""

    kind: str
    start: int
    end: int


class _Span(Protocol):
    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


S = TypeVar("S", bound=_Span)


@dataclass(frozen=True)
class _Detector:
    kind: str
    pattern: re.Pattern[str]
    # Optional second look at the value (the `secret` group, or the whole match).
    accept: Callable[[str, re.Match[str]], bool] | None = None
    # A pattern every match of this detector also matches, shared by several detectors
    # and searched once per text: a text without it is not searched by them. Most texts
    # hold no credential, and the screen runs on every field of every write and on every
    # recalled entry.
    hint: re.Pattern[str] | None = None


# A token never starts or ends inside a longer run of token characters.
_B = r"(?<![A-Za-z0-9_\-])"
_E = r"(?![A-Za-z0-9_\-])"


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum every payment card number carries."""
    if not digits.isdigit():
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char)
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _card_brand_plausible(digits: str) -> bool:
    """An issuer prefix and length some card network uses. Luhn alone passes one random
    number in ten; the prefix keeps order numbers and timestamps out."""
    length = len(digits)
    first2 = int(digits[:2])
    first4 = int(digits[:4])
    if digits[0] == "4":  # Visa
        return length in (13, 16, 19)
    if 51 <= first2 <= 55 or 2221 <= first4 <= 2720:  # Mastercard
        return length == 16
    if first2 in (34, 37):  # American Express
        return length == 15
    if first2 in (30, 36, 38, 39) or 3528 <= first4 <= 3589:  # Diners, JCB
        return 14 <= length <= 19
    if digits[0] == "6" or first2 in (50, 56, 57, 58):  # Discover, UnionPay, Maestro
        return 12 <= length <= 19
    return False


# 13 to 19 digits, optionally grouped by single spaces or dashes; not part of a longer run.
CARD_NUMBER_RE = re.compile(r"(?<![\d.])(?<!\d[ -])(?<!\+)(?:\d[ -]?){12,18}\d(?![ -]?\d)")


def is_card_number(candidate: str) -> bool:
    separators = {c for c in candidate if not c.isdigit()}
    if len(separators) > 1:
        return False
    digits = "".join(c for c in candidate if c.isdigit())
    return 13 <= len(digits) <= 19 and _card_brand_plausible(digits) and luhn_valid(digits)


# A UUID's middle groups can read as a grouped card number (about one member id in 3,000
# did): digits inside a UUID are an identifier, never a card.
_UUID_RE = re.compile(r"(?i:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


def _inside_uuid(match: re.Match[str]) -> bool:
    start, end = match.span()
    return any(u.start() <= start and end <= u.end() for u in _UUID_RE.finditer(match.string))


def _is_card_match(match: re.Match[str]) -> bool:
    return is_card_number(match.group()) and not _inside_uuid(match)


def find_card_numbers(text: str) -> list[tuple[int, int]]:
    """Spans of payment card numbers (Luhn, a card network's prefix and length)."""
    return [m.span() for m in CARD_NUMBER_RE.finditer(text) if _is_card_match(m)]


# -- value heuristics ---------------------------------------------------------------------

_PLACEHOLDER_WORDS = frozenset(
    {
        "none",
        "null",
        "nil",
        "empty",
        "blank",
        "required",
        "optional",
        "unknown",
        "hidden",
        "changed",
        "reset",
        "redacted",
        "missing",
        "same",
        "n/a",
        "tbd",
        "todo",
        "forgotten",
        "expired",
        "incorrect",
        "invalid",
        "wrong",
        "weak",
        "strong",
        "secret",
        "password",
        "masked",
        "true",
        "false",
    }
)
_DOTTED_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+$")


def _is_placeholder(value: str) -> bool:
    stripped = value.strip("\"'")
    if not stripped or stripped[0] in "<{$%[⟦(":
        return True  # <your-key>, {{ var }}, ${ENV}, [redacted:...], ⟦pii:...⟧
    if stripped.lower() in _PLACEHOLDER_WORDS:
        return True
    if len(set(stripped)) == 1:  # ********, xxxxxxxx
        return True
    if re.fullmatch(r"[A-Z_]+", stripped) and "_" in stripped:  # YOUR_API_KEY
        return True
    if stripped.lower().startswith(("your_", "your-", "my_", "example", "placeholder")):
        return True
    return bool(_DOTTED_IDENTIFIER.match(stripped))  # os.environ, settings.API_KEY


def _has_digit_and_letter(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _looks_random(value: str) -> bool:
    """A value a person would not write as a word: digits and letters, or mixed case
    inside the word, or a symbol."""
    if _has_digit_and_letter(value):
        return True
    if any(c.isupper() for c in value[1:]) and any(c.islower() for c in value):
        return True
    return any(not c.isalnum() for c in value.strip("\"'"))


def _token_tail(prefix_len: int) -> Callable[[str, re.Match[str]], bool]:
    def accept(value: str, match: re.Match[str]) -> bool:
        return _has_digit_and_letter(value[prefix_len:])

    return accept


def _generic_strong(value: str, match: re.Match[str]) -> bool:
    value = value.strip("\"'")
    if _is_placeholder(value):
        return False
    return _has_digit_and_letter(value) or len(value) >= 20 or _looks_random(value)


def _generic_weak(value: str, match: re.Match[str]) -> bool:
    return not _is_placeholder(value) and _has_digit_and_letter(value)


def _password_assigned(value: str, match: re.Match[str]) -> bool:
    """`password: X` / `pwd=X`: any single token except placeholders and prose."""
    bare = value.strip("\"'")
    if len(bare) < 3 or _is_placeholder(bare):
        return False
    if value[0] in "\"'":
        return True
    if bare.isalpha():
        # "password: click the link below" is a sentence, not a password.
        rest = match.string[match.end() : match.end() + 2]
        if len(rest) == 2 and rest[0] == " " and rest[1].isalpha():
            return False
    return True


def _password_stated(value: str, match: re.Match[str]) -> bool:
    """`my password is X`: only a value that does not read as a word ("is strong")."""
    bare = value.strip("\"'")
    if len(bare) < 4 or _is_placeholder(bare):
        return False
    if value[0] in "\"'":
        return True
    bare = bare.rstrip(".!?")
    return any(c.isdigit() for c in bare) or _looks_random(bare)


# -- the detectors, most specific first ---------------------------------------------------

_KEYWORD_VALUE = r"[\"']?\s*(?:[:=]|=>|:=)\s*[\"']?"
_KEYED_VALUE = r"(?P<secret>[A-Za-z0-9_\-./+=~]{8,})"
_LOGIN_WORDS = (
    r"password|passwort|passwd|passphrase|passcode|pass\s?code|pwd|pw|mot\s+de\s+passe|kennwort"
)
_LOGIN_KEYWORD = rf"(?i:\b(?:{_LOGIN_WORDS})\b)"
_QUOTED = r"\"[^\"\n]{3,}\"|'[^'\n]{3,}'"
# `pwd=X&next=…`: the value ends at a query separator.
_PASSWORD_VALUE = rf"(?P<secret>{_QUOTED}|[^\s\"',;&]{{3,}})"
# `my password is X.`: the value may hold `&`, but not the sentence's closing punctuation.
_PASSWORD_STATED_VALUE = rf"(?P<secret>{_QUOTED}|[^\s\"']{{2,}}[^\s\"'.!?,;:)])"

# The hints (`_Detector.hint`). A vendor's prefix, or a URL's scheme, is in every match of
# its detector; one of the keywords is in every match of the detectors that name them,
# under the same case-folding rules (`re.IGNORECASE`); a card number has digits.
_VENDOR = re.compile(
    r"-----BEGIN|eyJ|AKIA|ASIA|gh[pousr]_|github_pat_|xox[abpr]-|sk_|rk_|whsec_|sk-|AIza|iris_|://"
)
# The lookahead lets the search skip quickly past a character that starts none of them.
_KEYWORDS = re.compile(
    r"(?i)(?=[abkpst])(?:bearer|authorization|key|secret|token|pass|pw|kennwort|pin)"
)
_DIGIT = re.compile(r"\d")

_DETECTORS: tuple[_Detector, ...] = (
    _Detector(
        "private-key",
        re.compile(
            r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
            r".*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
        hint=_VENDOR,
    ),
    _Detector(
        "jwt",
        re.compile(_B + r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*" + _E),
        hint=_VENDOR,
    ),
    _Detector(
        "aws-access-key",
        re.compile(_B + r"(?:AKIA|ASIA)[A-Z0-9]{16}" + _E),
        hint=_VENDOR,
    ),
    _Detector(
        "github-token",
        re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{40,})" + _E),
        hint=_VENDOR,
    ),
    _Detector(
        "slack-token",
        re.compile(_B + r"xox[abpr]-(?:[A-Za-z0-9]+-)*[A-Za-z0-9]{6,}" + _E),
        lambda value, m: len(value) >= 20 and any(c.isdigit() for c in value),
        hint=_VENDOR,
    ),
    _Detector(
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/-]{20,}"),
        hint=_VENDOR,
    ),
    _Detector(
        "stripe-key",
        re.compile(
            _B + r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})" + _E
        ),
        hint=_VENDOR,
    ),
    _Detector(
        "anthropic-key",
        re.compile(_B + r"sk-ant-[a-z0-9]{2,10}-[A-Za-z0-9_-]{20,}" + _E),
        _token_tail(7),
        hint=_VENDOR,
    ),
    _Detector(
        "openai-key",
        re.compile(_B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}" + _E),
        _token_tail(3),
        hint=_VENDOR,
    ),
    _Detector("google-api-key", re.compile(_B + r"AIza[0-9A-Za-z_-]{35}" + _E), hint=_VENDOR),
    _Detector("iris-token", re.compile(_B + r"iris_[A-Za-z0-9_-]{32,}" + _E), hint=_VENDOR),
    _Detector(
        "url-credentials",
        re.compile(
            r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@?#]+:(?P<secret>[^\s:/@?#]{3,})@[^\s/@]"
        ),
        lambda value, m: not _is_placeholder(value),
        hint=_VENDOR,
    ),
    _Detector(
        "bearer-token",
        re.compile(r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)" + _E),
        lambda value, m: _has_digit_and_letter(value),
        hint=_KEYWORDS,
    ),
    _Detector(
        "basic-auth",
        re.compile(r"(?i:\bauthorization\s*[:=]\s*basic)\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})"),
        hint=_KEYWORDS,
    ),
    _Detector("card-number", CARD_NUMBER_RE, lambda value, m: _is_card_match(m), hint=_DIGIT),
    _Detector(
        "api-key",
        re.compile(
            r"(?i:\b(?:[a-z0-9]+[_-]){0,4}(?:api[_ -]?key|apikey|api[_-]?secret|api[_-]?token|"
            r"access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|secret[_-]?key|"
            r"client[_-]?secret|app[_-]?secret|auth[_-]?token|access[_-]?token|"
            r"refresh[_-]?token|private[_-]?token|x-api-key))" + _KEYWORD_VALUE + _KEYED_VALUE
        ),
        _generic_strong,
        hint=_KEYWORDS,
    ),
    _Detector(
        "api-key",
        re.compile(
            r"(?i:\b(?:token|secret))" + _KEYWORD_VALUE + r"(?P<secret>[A-Za-z0-9_\-./+=~]{16,})"
        ),
        _generic_weak,
        hint=_KEYWORDS,
    ),
    _Detector(
        "password",
        re.compile(_LOGIN_KEYWORD + r"\s*[\"']?\s*(?:[:=]|=>|:=)\s*" + _PASSWORD_VALUE),
        _password_assigned,
        hint=_KEYWORDS,
    ),
    _Detector(
        "password",
        re.compile(
            _LOGIN_KEYWORD
            + r"(?:\s+(?:for|to|on|of|at)(?:\s+[^\s]+){1,3}?)?\s+(?:is|was|ist|est)\s*:?\s*"
            + _PASSWORD_STATED_VALUE
        ),
        _password_stated,
        hint=_KEYWORDS,
    ),
    _Detector(
        "password",
        re.compile(r"(?i:\bpin(?:\s+(?:code|number))?)(?:\s*[:=]|\s+is)\s*(?P<secret>\d{4,8})\b"),
        hint=_KEYWORDS,
    ),
)

# The detectors by hint, each group in the order above (the order findings are ranked in is
# `_RANK`, not this one).
_BY_HINT: tuple[tuple[re.Pattern[str] | None, tuple[_Detector, ...]], ...] = tuple(
    (hint, tuple(d for d in _DETECTORS if d.hint is hint))
    for hint in dict.fromkeys(d.hint for d in _DETECTORS)
)

SECRET_KINDS: frozenset[str] = frozenset(d.kind for d in _DETECTORS)

_RANK = {kind: rank for rank, kind in enumerate(dict.fromkeys(d.kind for d in _DETECTORS))}


def pick_non_overlapping(candidates: Iterable[S], rank: Callable[[S], int]) -> list[S]:
    """Keep the best of overlapping findings: lower rank first, then the earlier, longer one.
    The result is in text order."""
    kept: list[S] = []  # in text order, never overlapping
    starts: list[int] = []
    for candidate in sorted(candidates, key=lambda c: (rank(c), c.start, -(c.end - c.start))):
        at = bisect.bisect_left(starts, candidate.start)
        if at > 0 and kept[at - 1].end > candidate.start:
            continue
        if at < len(kept) and kept[at].start < candidate.end:
            continue
        kept.insert(at, candidate)
        starts.insert(at, candidate.start)
    return kept


def find_secrets(text: str) -> list[SecretFinding]:
    """Every credential in `text`, in text order, without overlaps."""
    return _find(text, gated=True)


def _find(text: str, *, gated: bool) -> list[SecretFinding]:
    """`find_secrets`; with `gated=False` every detector searches the whole text (what the
    tests hold the gates to)."""
    if not text:
        return []
    candidates: list[SecretFinding] = []
    for hint, detectors in _BY_HINT:
        if gated and hint is not None and hint.search(text) is None:
            continue
        for detector in detectors:
            candidates.extend(_findings(detector, text))
    if not candidates:
        return []
    return pick_non_overlapping(candidates, lambda f: _RANK[f.kind])


def _findings(detector: _Detector, text: str) -> Iterator[SecretFinding]:
    """What one detector finds in the whole text (its value check passed)."""
    for match in detector.pattern.finditer(text):
        group = "secret" if "secret" in detector.pattern.groupindex else 0
        start, end = match.span(group)
        value = match.group(group)
        if detector.accept is not None and not detector.accept(value, match):
            continue
        yield SecretFinding(detector.kind, start, end)


def contains_secret(text: str) -> bool:
    return bool(find_secrets(text))


def secret_kinds(text: str) -> list[str]:
    """The distinct kinds found, in text order (what a refusal may name)."""
    return list(dict.fromkeys(f.kind for f in find_secrets(text)))


# A marker changes its neighbours' context (a key glued to a password's tail starts after
# a letter before and after `]` once the password is redacted), so redaction runs until
# nothing is left to find. Each pass removes at least one finding; the cap is a backstop.
_MAX_PASSES = 8


def redact_secrets(text: str) -> str:
    """`text` with every credential replaced by `[redacted:<kind>]`. Idempotent."""
    for _ in range(_MAX_PASSES):
        findings = find_secrets(text)
        if not findings:
            break
        parts: list[str] = []
        cursor = 0
        for finding in findings:
            parts.append(text[cursor : finding.start])
            parts.append(f"[redacted:{finding.kind}]")
            cursor = finding.end
        parts.append(text[cursor:])
        text = "".join(parts)
    return text


def scrub_outbound(text: str) -> str:
    """PRE_RESPONSE: what leaves Iris (recall answers, exports) carries no credential.
    `vault://` handles pass: a handle is not the value."""
    return redact_secrets(text)


def scrub_outbound_data(value: Any) -> Any:
    """`scrub_outbound` over every string inside a JSON-like structure (keys included)."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, Mapping):
        return {scrub_outbound_data(k): scrub_outbound_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_outbound_data(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class FieldFinding:
    """The first stored field that holds a credential: its wire path and the kinds found."""

    field: str
    kinds: tuple[str, ...]


def screen_fields(
    texts: Mapping[str, str | None], *, declared: Iterable[str] = ()
) -> FieldFinding | None:
    """The one secret screen for every stored free-text field of a write.

    `texts` maps each field's wire path (`body`, `suppression.notes`,
    `provenanceChain[0].ref`) to the text that would be stored; fields in `declared` go to
    the vault instead and are skipped. Fields are read in the caller's order, so the
    refusal names the first one, the same way every time.
    """
    skip = {declared} if isinstance(declared, str) else set(declared)
    for name, text in texts.items():
        if name in skip or not text:
            continue
        kinds = secret_kinds(text)
        if kinds:
            return FieldFinding(name, tuple(kinds))
    return None
