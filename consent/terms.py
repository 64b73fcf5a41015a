"""The consent terms a member agrees to, versioned, and the hash the ledger records.

Every consent event carries `terms_hash`: the SHA-256 of the exact text the member was
shown, so the ledger proves which words a consent was given under even after the terms
change. The hash is over the UTF-8 bytes of the text as stored here, with no
normalisation: changing a single character is a new version with a new hash. Published
versions are never edited, only added.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

TERMS: dict[str, str] = {
    "2025-01": (
        "Iris remembers what you tell the assistant so it can help you better. "
        "We process your messages to answer you (data processing) and, if you allow it, "
        "keep memories between sessions (data storage). Sensitive topics such as health, "
        "faith or money are remembered only if you switch each one on. "
        "You can see, correct, pause, export or delete what Iris remembers at any time, "
        "and you can withdraw any consent as easily as you gave it."
    ),
    "2025-09": (
        "Iris remembers what you tell the assistant so it can help you better. "
        "We process your messages to answer you (data processing) and, if you allow it, "
        "keep memories between sessions (data storage). Sensitive topics such as health, "
        "faith, money or your body's movement in scenes are remembered only if you switch "
        "each one on, and memories about other people you mention are kept as a masked "
        "reference, never as a profile of them. "
        "Support staff may look at your memory only through a recorded, justified request, "
        "and we tell you when someone did. "
        "You can see, correct, pause, export or delete what Iris remembers at any time, "
        "and you can withdraw any consent as easily as you gave it. Withdrawing consent "
        "for a sensitive topic deletes what Iris remembered about it."
    ),
}

CURRENT_TERMS_VERSION = "2025-09"


@dataclass(frozen=True)
class ConsentTerms:
    version: str
    text: str
    hash: str


def terms_hash(text: str) -> str:
    """SHA-256 hex of the terms text's UTF-8 bytes (spec: computeIrisConsentTermsHash)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def terms(version: str) -> ConsentTerms:
    """One published version; KeyError for a version that was never published."""
    text = TERMS[version]
    return ConsentTerms(version=version, text=text, hash=terms_hash(text))


def current_terms() -> ConsentTerms:
    return terms(CURRENT_TERMS_VERSION)


def version_of_hash(hash_hex: str) -> str | None:
    """Which published version a ledger row's terms hash names, if any.

    A consent imported through a data-rights request may carry the hash of terms Iris
    never published, so an unknown hash is an answer (None), not an error.
    """
    for version, text in TERMS.items():
        if terms_hash(text) == hash_hex:
            return version
    return None
