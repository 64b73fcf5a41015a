"""Continuation-token suite (spec: "reconnect mid-segment resumes correctly across Tara /
Psyche / Living Scenes / Nisaba / Metis"): for each product surface a device writes its
place as it goes, another device reconnects and must resume exactly at the last place;
then it moves on and the first device resumes from there; two devices writing moments
apart: the later one wins and is told. Time is Iris's fixed clock, moved by the test."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from tests.evals.generators import T0
from tests.evals.support import place

pytestmark = pytest.mark.django_db

URL = "/api/v1/continuation-tokens"


@dataclass(frozen=True)
class Product:
    name: str  # the spec's product
    surface: str  # the Iris surface that writes its tokens
    scope: str  # scope key template ({u}: the member)
    kind: str  # anchor kind
    posture: str
    places: tuple[dict, ...]  # successive places, as a device reports them


# fmt: off
PRODUCTS: tuple[Product, ...] = (
    Product("Tara", "tara", "session:{u}:tara-1", "segment", "listening", (
        {"ref": "book-42/ch-3/seg-7", "offsetMs": 1200},
        {"ref": "book-42/ch-3/seg-7", "offsetMs": 73500},
        {"ref": "book-42/ch-3/seg-8", "offsetMs": 4100})),
    Product("Psyche", "assistant", "session:{u}:chat-9", "turn", "conversing", (
        {"ref": "turn-11"}, {"ref": "turn-12"}, {"ref": "turn-15"})),
    Product("Living Scenes", "studio", "scene:{u}:s-3:harbour", "scene", "practicing", (
        {"ref": "harbour/beat-1", "position": 1},
        {"ref": "harbour/beat-2", "position": 2},
        {"ref": "harbour/beat-2", "position": 3})),
    Product("Nisaba", "nisaba", "session:{u}:read-5", "page", "reading", (
        {"ref": "atlas/p-10"}, {"ref": "atlas/p-11", "position": 40},
        {"ref": "atlas/p-12", "position": 5})),
    Product("Metis", "metis", "session:{u}:course-2", "lesson-step", "studying", (
        {"ref": "algebra/l-4/step-1"}, {"ref": "algebra/l-4/step-2"},
        {"ref": "algebra/l-5/step-1"})),
)
# fmt: on


def token(member, product: Product, where: dict, device: str, at) -> dict:
    return place(
        str(member.public_id),
        surface=product.surface,
        scope_key=product.scope.format(u=member.public_id),
        anchor={"kind": product.kind, **where},
        posture=product.posture,
        device=device,
        at=at.isoformat().replace("+00:00", "Z"),
    )


def resume(client, member, product: Product) -> dict:
    answer = client.get(URL, {"userId": str(member.public_id), "surface": product.surface})
    assert answer.status_code == 200, answer.content
    results = answer.json()["results"]
    assert len(results) == 1, results  # one place per product and scope: the latest
    return results[0]


@pytest.mark.parametrize("product", PRODUCTS, ids=lambda p: p.name)
def test_reconnecting_resumes_at_the_exact_place(
    product, member, surface_api, clock, metric
) -> None:
    at = T0
    resumes = 0
    # The phone reports each place as the member goes; the laptop reconnects after each.
    for where in product.places:
        at += timedelta(minutes=5)
        clock.move_to(at)
        written = surface_api.post(URL, token(member, product, where, "phone", at), format="json")
        assert written.status_code in (200, 201), written.content
        assert written.json()["outcome"] == "written"
        clock.move_to(at + timedelta(minutes=1))
        got = resume(surface_api, member, product)
        assert got["anchorRef"] == {"surface": product.surface, "kind": product.kind, **where}
        assert (got["deviceId"], got["posture"]) == ("phone", product.posture)
        resumes += 1
    # The laptop moves on; the phone reconnects and resumes there.
    at += timedelta(minutes=10)
    clock.move_to(at)
    onward = {**product.places[-1], "ref": product.places[-1]["ref"] + "-next"}
    moved = surface_api.post(URL, token(member, product, onward, "laptop", at), format="json")
    assert moved.json()["conflictNotice"] is None  # minutes apart: no conflict
    got = resume(surface_api, member, product)
    assert got["anchorRef"]["ref"] == onward["ref"] and got["deviceId"] == "laptop"
    resumes += 1
    # Both devices at once: the later write wins, and its device is told of the other.
    clock.move_to(at + timedelta(minutes=5))
    surface_api.post(URL, token(member, product, product.places[0], "phone", at), format="json")
    clock.move_to(at + timedelta(minutes=5, seconds=1))
    later = surface_api.post(
        URL, token(member, product, product.places[1], "laptop", at), format="json"
    )
    assert later.json()["outcome"] == "written"
    assert later.json()["conflictNotice"] is not None
    got = resume(surface_api, member, product)
    assert got["anchorRef"]["ref"] == product.places[1]["ref"] and got["deviceId"] == "laptop"
    metric(
        "continuation-tokens",
        products=len(PRODUCTS),
        **{f"{product.surface}_exact_resumes": resumes + 1},
    )
