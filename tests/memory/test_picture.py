"""The memory picture's drawing: plain values in, SVG text out (no database, no Django)."""

# The XML parsed here is the SVG these tests just drew, never outside input.
# ruff: noqa: S314

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory import picture

SVG = "{http://www.w3.org/2000/svg}"


def chart(*series: tuple[str, tuple[int, ...]]) -> picture.Chart:
    periods = tuple(f"M{i}" for i in range(len(series[0][1]))) if series else ()
    return picture.Chart(
        "By kind", periods, tuple(picture.Series(k, k.title(), c) for k, c in series)
    )


def bars(svg: str) -> list[ET.Element]:
    return ET.fromstring(svg).findall(f"{SVG}rect")


@pytest.mark.parametrize(
    ("today", "count", "expected"),
    [
        (date(2026, 12, 2), 3, [date(2026, 10, 1), date(2026, 11, 1), date(2026, 12, 1)]),
        (date(2026, 2, 28), 3, [date(2025, 12, 1), date(2026, 1, 1), date(2026, 2, 1)]),
        (date(2026, 1, 1), 1, [date(2026, 1, 1)]),
    ],
)
def test_months_ending_counts_back_across_years(today, count, expected) -> None:
    assert picture.months_ending(today, count) == expected


def test_cumulative_carries_older_counts_into_the_first_month() -> None:
    months = [date(2026, 10, 1), date(2026, 11, 1), date(2026, 12, 1)]
    counts = {date(2026, 1, 1): 4, date(2026, 11, 1): 2, date(2026, 12, 1): 1}
    assert picture.cumulative(counts, months) == (4, 6, 7)


def test_the_svg_is_one_image_named_by_the_page_with_a_bar_per_nonzero_count() -> None:
    svg = picture.stacked_bars(
        chart(("profile", (0, 2, 3)), ("notebook", (0, 0, 1))), label_id="pic-title"
    )
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img" and root.get("aria-labelledby") == "pic-title"
    drawn = bars(svg)
    assert len(drawn) == 3  # zeros draw nothing
    assert [r.find(f"{SVG}title").text for r in drawn] == [
        "M1: Profile, 2",
        "M2: Profile, 3",
        "M2: Notebook, 1",
    ]
    assert "<script" not in svg and "style=" not in svg


def test_stacked_heights_are_proportional_and_stay_inside_the_plot() -> None:
    svg = picture.stacked_bars(chart(("a", (1, 4)), ("b", (1, 1))), label_id="t", height=240)
    heights = [float(r.get("height")) for r in bars(svg)]
    # The axis top is 5 (the nice number above 5); the plot is 240 - 12 - 32 = 196 high.
    assert heights == pytest.approx([196 / 5, 196 / 5, 4 * 196 / 5, 196 / 5])
    assert all(float(r.get("y")) >= 12 for r in bars(svg))


def test_labels_are_escaped() -> None:
    svg = picture.stacked_bars(
        picture.Chart("t", ("<b>",), (picture.Series("x", "A & B", (1,)),)), label_id="t"
    )
    ET.fromstring(svg)  # well-formed
    assert "&lt;b&gt;" in svg and "A &amp; B" in svg


def test_an_empty_chart_still_draws_its_axis() -> None:
    svg = picture.stacked_bars(chart(("a", (0, 0))), label_id="t")
    assert bars(svg) == [] and ET.fromstring(svg).findall(f"{SVG}line")


@given(st.lists(st.lists(st.integers(0, 500), min_size=3, max_size=3), min_size=1, max_size=6))
def test_no_bar_ever_leaves_the_picture(counts) -> None:
    series = tuple((f"s{i}", tuple(c)) for i, c in enumerate(counts))
    svg = picture.stacked_bars(chart(*series), label_id="t", width=640, height=240)
    for rect in bars(svg):
        y, h = float(rect.get("y")), float(rect.get("height"))
        assert 12 - 0.2 <= y and y + h <= 240 - 32 + 0.2
