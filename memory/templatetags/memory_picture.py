"""`{% memory_picture %}`: the picture of what Iris remembers, on the member's memory page.

A tag rather than view context so the picture stays one self-contained piece of the page:
it reads through `memory.selectors.memory_picture` with the member's own principal and
draws through the pure `memory.picture`. Members only; it renders nothing for anyone else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from governance import vocabulary
from governance.models import User
from governance.principal import principal_of
from memory import picture, selectors

register = template.Library()


@dataclass(frozen=True)
class DrawnChart:
    id: str
    chart: picture.Chart
    svg: SafeString
    rows: list[tuple[str, tuple[int, ...], int]]  # (label, counts, colour) for the table


def _drawn(chart_id: str, chart: picture.Chart) -> DrawnChart:
    # The SVG is built from escaped labels and numbers only (memory.picture escapes).
    svg = mark_safe(picture.stacked_bars(chart, label_id=f"{chart_id}-title"))  # noqa: S308  # nosec B308 B703 - every text in it is escaped
    rows = [(s.label, s.counts, i % picture.PALETTE_SIZE) for i, s in enumerate(chart.series)]
    return DrawnChart(chart_id, chart, svg, rows)


@register.inclusion_tag("memory/_picture.html", takes_context=True)
def memory_picture(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    if not isinstance(user, User) or user.kind != User.Kind.MEMBER:
        return {"picture": None}
    counts = selectors.memory_picture(
        principal=principal_of(user), member=user, today=timezone.now().date()
    )
    periods = tuple(picture.month_label(m) for m in counts.months)
    by_scope = picture.Chart(
        "By kind of memory",
        periods,
        tuple(picture.Series(k, vocabulary.SCOPE_LABELS[k], c) for k, c in counts.by_scope.items()),
    )
    by_topic = picture.Chart(
        "By topic",
        periods,
        tuple(
            picture.Series(g, vocabulary.TOPIC_GROUPS[g].label, c)
            for g, c in counts.by_topic_group.items()
        ),
    )
    return {
        "picture": counts,
        "periods": periods,
        "charts": [_drawn("picture-scope", by_scope), _drawn("picture-topic", by_topic)],
    }
