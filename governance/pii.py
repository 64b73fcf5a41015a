"""Personal identifiers: the one module that finds them, and stable per-member tokens that
stand in for them (issue 5 item 3).

Pure rules: no Django. Text bound for another system or another person's eyes (an
operator view outside a data-rights fulfilment, a cross-system reference, a log line) has
its e-mail addresses, phone numbers, postal addresses, government and card numbers replaced
by `⟦pii:<kind>:<12 hex>⟧`, an HMAC-SHA256 under the member's own key. The same member and
value always give the same token, so a reader can still see "the same address as before";
two members never share one, so tokens cannot be joined across members.

Tokens are resolved only from the member's own memory: `token_map` re-scans texts the
member owns and `detokenise` puts the values back. No table maps tokens to plaintext, so
forgetting a memory also makes its tokens unresolvable. The Django side (the key lives in
the vault) is `governance.vault.member_pii_key` and friends.

Like the secret screen, detectors prefer precision: a phone number needs a `+`, a national
layout with separators, or a keyword in front; a bare run of digits is not a phone number.
The corpus in `tests/governance/corpus/pii_*.txt` is the contract.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from governance.secrets_screen import find_card_numbers, pick_non_overlapping

TOKEN_HEX_LENGTH = 12  # 48 bits: no collision in practice within one member's values
TOKEN_RE = re.compile(r"⟦pii:(?P<kind>[a-z][a-z-]*):(?P<digest>[0-9a-f]{12})⟧")
_TOKEN_CONTEXT = b"iris.pii-token.v1"

# Text that is already an id or a stand-in: never scanned for identifiers.
_PROTECTED_RE = re.compile(
    TOKEN_RE.pattern
    + r"|vault://[0-9A-Fa-f-]{36}"
    + r"|\[redacted:[a-z-]+\]|\[pii:[a-z-]+\]"
    + r"|\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b"
)


@dataclass(frozen=True, slots=True)
class PiiFinding:
    kind: str
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class _Detector:
    kind: str
    pattern: re.Pattern[str]
    accept: Callable[[str], bool] | None = None


def _digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())


def _digit_count(low: int, high: int) -> Callable[[str], bool]:
    def accept(value: str) -> bool:
        return low <= len(_digits(value)) <= high

    return accept


def _balanced_parentheses(value: str) -> bool:
    return value.count("(") == value.count(")")


def _phone(low: int, high: int) -> Callable[[str], bool]:
    count = _digit_count(low, high)
    return lambda value: count(value) and _balanced_parentheses(value)


_NOT_BEFORE_PHONE = r"(?<![\w+/.])"
_NOT_AFTER_NUMBER = r"(?![\w])(?!-\d)(?!\.\d)"

_US_STATES = (
    "AL|AK|AZ|AR|CA|CO|CT|DE|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|"
    "NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY|DC"
)
_STREET_TYPES_EN = (
    "Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Boulevard|Blvd|Court|Ct|Place|Pl|Way|"
    "Close|Crescent|Cres|Terrace|Tce|Square|Sq|Highway|Hwy|Parkway|Pkwy|Circle|Cir|Gardens|"
    "Grove|Row|Mews|Hill|Walk|Rise|Broadway"
)
_CAP = r"[A-ZÄÖÜÉÈÊÀÂÎÔÛÇ]"
_LOW = r"[a-zäöüßéèêëàâîïôûùç]"

_DETECTORS: tuple[_Detector, ...] = (
    _Detector(
        "ssn",
        re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])"),
    ),
    _Detector(
        "ssn",
        re.compile(
            r"(?i:\b(?:ssn|social\s+security(?:\s+(?:number|no\.?))?))[\s:#]*"
            r"(?P<v>\d{3}[ -]?\d{2}[ -]?\d{4})(?!\d)"
        ),
    ),
    _Detector(
        "ni-number",
        re.compile(
            r"\b(?!BG|GB|NK|KN|TN|NT|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
            r" ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b"
        ),
    ),
    _Detector(
        "government-id",
        re.compile(
            r"(?i:\b(?:passport|reisepass|passeport|id[ -]card|identity\s+card|national\s+id|"
            r"personalausweis|carte\s+d['’]identit[ée]|driver['’]?s\s+licen[cs]e|"
            r"driving\s+licen[cs]e|nhs|tax\s+id|steuer-?id|steuernummer|"
            r"num[ée]ro\s+fiscal)\b(?:[ \t]+(?:no\.?|number|nr\.?|num[ée]ro|nummer))?)"
            r"[ \t]*(?:is|:|#|=)?[ \t]*"
            r"(?P<v>[A-Z0-9]{3,18}(?:[ -](?=[A-Z0-9]*\d)[A-Z0-9]{2,6}){0,3})(?![\w-])"
        ),
        lambda value: len(_digits(value)) >= 5,
    ),
    _Detector(
        "email",
        re.compile(
            r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@"
            r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])"
        ),
    ),
    _Detector(
        "postcode",
        re.compile(r"\b(?:[A-PR-UWYZ][A-HK-Y]?\d[A-Z\d]?|GIR) ?\d[ABD-HJLNP-UW-Z]{2}\b"),  # UK
    ),
    _Detector(
        "postcode",
        re.compile(rf"\b(?:{_US_STATES})[ \t]+(?P<v>\d{{5}}(?:-\d{{4}})?)(?![\w-])"),
    ),
    _Detector(
        # DE/FR: five digits and a town, after a comma, a line start or a country prefix.
        "postcode",
        re.compile(
            rf"(?:^|[,;]|\b[DF]-)[ \t]*(?P<v>\d{{5}}[ \t]+{_CAP}{_LOW}+(?:[ \t-]{_CAP}{_LOW}+)?)"
            # ...ending the line or the clause ("10115 Berlin, Germany"), which keeps
            # "10000 Steps a day" out.
            r"(?=[ \t]*(?:$|[,.;)]|[ \t]+(?:Germany|Deutschland|France|CEDEX|Cedex)\b))",
            re.MULTILINE,
        ),
    ),
    _Detector(
        "address",
        re.compile(
            r"\b\d{1,5}[A-Za-z]?(?:-\d{1,5})?,?[ \t]+(?:[A-Z][A-Za-z'’.-]*[ \t]+){1,4}"
            rf"(?:{_STREET_TYPES_EN})\b\.?"
        ),
    ),
    _Detector(
        "address",
        re.compile(
            # Starts where a word starts (not after a hyphen), so a long hyphenated run is
            # read once, not once per segment.
            rf"(?<![\w-]){_CAP}{_LOW}+(?:-{_CAP}{_LOW}+){{0,3}}-?"
            r"(?:[Ss]tra(?:ß|ss)e|[Ss]tr\.|[Ww]eg|[Gg]asse|[Pp]latz|[Aa]llee|[Dd]amm)"
            r"[ \t]+\d{1,4}[a-z]?\b"
        ),
    ),
    _Detector(
        "address",
        re.compile(
            r"\b\d{1,4}(?:[ \t]?(?:bis|ter))?,?[ \t]+"
            r"(?i:rue|avenue|av\.|boulevard|bd|place|all[ée]e|impasse|chemin|quai|route|cours)"
            r"[ \t]+(?:(?:de|du|des|la|le|l['’]|d['’])[ \t]*)*"
            rf"{_CAP}[\w'’-]*(?:[ \t]+{_CAP}[\w'’-]*)*"
        ),
    ),
    _Detector(
        # International: +44 20 7946 0958, +1 (415) 555-0132, 0049 30 1234567.
        "phone",
        re.compile(
            _NOT_BEFORE_PHONE
            # Groups need a separator between them, so a long digit run has one reading.
            + r"(?:\+|\b00)(?:\d{7,15}|\d{1,4}(?:[ .-]?\(\d{1,5}\)[ .-]?\d{1,8})?"
            + r"(?:[ .-]\d{1,8}){0,6})"
            + _NOT_AFTER_NUMBER
        ),
        _phone(8, 15),
    ),
    _Detector(
        # US: (415) 555-0132, 415-555-0132, 415.555.0132, 1-800-555-0199.
        "phone",
        re.compile(
            r"(?<![\w+(/.-])(?:1[ .-])?(?:\([2-9]\d{2}\)[ ]?|[2-9]\d{2}[ .-])[2-9]\d{2}[ .-]\d{4}"
            + _NOT_AFTER_NUMBER
        ),
    ),
    _Detector(
        # UK: 020 7946 0958, 07700 900123, 01632 960001.
        "phone",
        re.compile(
            _NOT_BEFORE_PHONE
            + r"0(?:\d{2,4}[ -]\d{3,4}[ -]?\d{3,4}|7\d{3}[ -]?\d{6})"
            + _NOT_AFTER_NUMBER
        ),
        _phone(10, 11),
    ),
    _Detector(
        # DE: 030 12345678, 089/1234567, 0151 23456789.
        "phone",
        re.compile(_NOT_BEFORE_PHONE + r"0\d{2,5}[ /-]\d{3,8}(?:[ -]\d{1,5})?" + _NOT_AFTER_NUMBER),
        _phone(9, 12),
    ),
    _Detector(
        # FR: 01 23 45 67 89, 06.12.34.56.78 (one separator throughout).
        "phone",
        re.compile(
            _NOT_BEFORE_PHONE + r"0[1-9](?P<sep>[ .-])\d{2}(?:(?P=sep)\d{2}){3}" + _NOT_AFTER_NUMBER
        ),
    ),
    _Detector(
        # A keyword in front makes any plausible digit run a phone number.
        "phone",
        re.compile(
            r"(?i:\b(?:phone|telephone|tel|mobile|cell|fax|whatsapp|handy|telefon|"
            r"t[ée]l[ée]phone|portable|call\s+me\s+on|text\s+me\s+on|ring\s+me\s+on)\b)\.?"
            r"(?:[ \t]*(?i:no|number|nr|num)\.?)?[ \t]*[:#]?[ \t]*"
            r"(?P<v>\+?\(?\d[\d \t./()-]{5,20}\d)" + _NOT_AFTER_NUMBER
        ),
        _phone(7, 15),
    ),
)

PII_KINDS: frozenset[str] = frozenset(d.kind for d in _DETECTORS) | {"card-number"}
_RANK = {
    kind: rank
    for rank, kind in enumerate(
        ["card-number", *dict.fromkeys(d.kind for d in _DETECTORS)],
    )
}


def find_pii(text: str) -> list[PiiFinding]:
    """Every personal identifier in `text`, in text order, without overlaps. Tokens, vault
    handles, redaction markers and UUIDs already in the text are left alone."""
    if not text:
        return []
    protected = [m.span() for m in _PROTECTED_RE.finditer(text)]

    def free(start: int, end: int) -> bool:
        return all(end <= p_start or start >= p_end for p_start, p_end in protected)

    candidates = [
        PiiFinding("card-number", start, end, text[start:end])
        for start, end in find_card_numbers(text)
        if free(start, end)
    ]
    for detector in _DETECTORS:
        for match in detector.pattern.finditer(text):
            group = "v" if "v" in detector.pattern.groupindex else 0
            start, end = match.span(group)
            value = match.group(group)
            if detector.accept is not None and not detector.accept(value):
                continue
            if free(start, end):
                candidates.append(PiiFinding(detector.kind, start, end, value))
    return pick_non_overlapping(candidates, lambda f: _RANK[f.kind])


def normalise(kind: str, value: str) -> str:
    """The form two spellings of one identifier share, so they get one token."""
    if kind == "email":
        return value.strip().casefold()
    if kind == "phone":
        digits = _digits(value)
        return ("+" + digits) if value.lstrip().startswith("+") else digits
    if kind in ("ssn", "card-number"):
        return _digits(value)
    if kind in ("ni-number", "government-id", "postcode"):
        return "".join(c for c in value.upper() if c.isalnum())
    return " ".join(value.casefold().split())


def token_for(kind: str, value: str, key: bytes) -> str:
    """`⟦pii:<kind>:<hex>⟧` for one identifier under one member's key."""
    if not key:
        # Without a secret the token is a plain hash, and identifiers are easy to guess.
        raise ValueError("key must not be empty")
    message = b"\x00".join((_TOKEN_CONTEXT, kind.encode(), normalise(kind, value).encode()))
    digest = hmac.new(key, message, hashlib.sha256).hexdigest()[:TOKEN_HEX_LENGTH]
    return f"⟦pii:{kind}:{digest}⟧"


def _replace(text: str, findings: Iterable[PiiFinding], render: Callable[[PiiFinding], str]) -> str:
    parts: list[str] = []
    cursor = 0
    for finding in findings:
        parts.append(text[cursor : finding.start])
        parts.append(render(finding))
        cursor = finding.end
    parts.append(text[cursor:])
    return "".join(parts)


# Replacing an identifier changes its neighbours' context ("x@example.org+44 20 7946 0958":
# the phone number follows a letter before, a token after), so replacement runs until
# nothing is left to find. Each pass removes at least one finding; the cap is a backstop.
_MAX_PASSES = 8


def _until_clean(text: str, render: Callable[[PiiFinding], str]) -> str:
    for _ in range(_MAX_PASSES):
        findings = find_pii(text)
        if not findings:
            break
        text = _replace(text, findings, render)
    return text


def tokenise(text: str, key: bytes) -> str:
    """`text` with every identifier replaced by its token under `key`. Idempotent."""
    if not key:
        raise ValueError("key must not be empty")
    return _until_clean(text, lambda f: token_for(f.kind, f.value, key))


def token_map(texts: Iterable[str], key: bytes) -> dict[str, str]:
    """token → value for every identifier in `texts` (the member's own memory): exactly
    the tokens `tokenise` would make of them.

    When one token stands for several spellings ("ADA@example.org", "ada@example.org"),
    the first one seen wins.
    """
    mapping: dict[str, str] = {}

    def record(finding: PiiFinding) -> str:
        token = token_for(finding.kind, finding.value, key)
        mapping.setdefault(token, finding.value)
        return token

    for text in texts:
        _until_clean(text, record)
    return mapping


def detokenise(text: str, mapping: Mapping[str, str]) -> str:
    """Put values back for the tokens `mapping` knows; leave the others as they are."""
    return TOKEN_RE.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)


def tokens_in(text: str) -> list[str]:
    return [m.group(0) for m in TOKEN_RE.finditer(text)]


def mask_pii(text: str) -> str:
    """Keyless masking for log lines: `[pii:<kind>]`, nothing that could be resolved."""
    return _until_clean(text, lambda f: f"[pii:{f.kind}]")
