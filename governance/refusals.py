"""A service's refusal as a page tells the member: addressed to them, with the way out.

The words and the way out (a URL name) are `governance.vocabulary.REFUSALS`, by the
refusal's code or rule; a refusal without words there keeps the service's own sentence.
The result is safe HTML (the link), which Django's message storage keeps safe.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from governance import vocabulary
from governance.errors import IrisError


def refusal_message(exc: IrisError, *, fallback: str | None = None) -> str | SafeString:
    words = vocabulary.refusal(exc.code) or vocabulary.refusal(exc.rule)
    if words is None:
        return fallback if fallback is not None else exc.detail
    if words.way_out is None:
        return words.text
    try:
        url = reverse(words.way_out)
    except NoReverseMatch:  # the page is not installed here: say it without the link
        return words.text
    return format_html('{} <a href="{}">{}</a>.', words.text, url, words.way_out_label)
