"""Admin-inspection suite (spec: "every illegitimate transition rejected; granted reads
stream to audit; user notice fires on close for sensitive reads"), through the API as
operators use it. Every state an inspection can rest in, on each of the three paths, is
asked to move to every state there is; the spec's table (written out below, not imported)
says which moves are legal. Illegal moves are 409 `transition-not-allowed` and change
nothing; legal ones go through."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from governance.models import AuditEvent
from inspection import services
from inspection.enums import InspectionState
from inspection.models import InspectionNotice
from tests.inspection.conftest import as_operator, consent_snapshot

pytestmark = pytest.mark.django_db

PATHS = ("routine-review", "dsar-fulfillment", "incident-escalation")
STATES = ("requested", *PATHS, "granted", "denied", "closed")
# The spec's InspectionStateMachine, TRANSITIONS.
LEGAL: dict[str, frozenset[str]] = {
    "requested": frozenset(PATHS),
    **{path: frozenset({"granted", "denied"}) for path in PATHS},
    "granted": frozenset({"closed"}),
    "denied": frozenset(),
    "closed": frozenset(),
}
URL = "/api/v1/inspections"


@dataclass(frozen=True)
class Path:
    name: str
    requester: str
    reviewer: str
    sensitive: bool


ROUTES = (
    Path("routine-review", "support", "admin", False),
    Path("dsar-fulfillment", "legal", "legal2", True),
    Path("incident-escalation", "tns", "tns2", True),
)


def test_the_table_is_the_enum() -> None:
    assert set(STATES) == {s.value for s in InspectionState}


class Console:
    """Operators of the tenant, each with their own signed-in API client."""

    def __init__(self, ops, member, client_for) -> None:
        self.ops, self.member = ops, member
        self.clients = {name: client_for(user) for name, user in ops.items()}

    def open(self, path: Path) -> str:
        body = {
            "userId": str(self.member.public_id),
            "path": path.name,
            "justification": "The member asked what was kept about them.",
            "reasonCode": "member-question",
            "sensitivity": "sensitive" if path.sensitive else "standard",
        }
        if path.sensitive:
            body["consentSnapshotId"] = consent_snapshot(self.member)
        if path.name == "incident-escalation":
            body["incidentReference"] = services.incident_reference_issue(
                principal=as_operator(self.ops["tns"]), member=self.member
            ).reference
        made = self.clients[path.requester].post(URL, body, format="json")
        assert made.status_code == 201, made.content
        assert made.json()["state"] == path.name
        return made.json()["id"]

    def move(self, who: str, inspection_id: str, to: str, **extra):
        return self.clients[who].post(
            f"{URL}/{inspection_id}/transition", {"to": to, **extra}, format="json"
        )

    def state(self, inspection_id: str) -> str:
        return self.clients["admin"].get(f"{URL}/{inspection_id}").json()["state"]

    def at(self, path: Path, state: str) -> str:
        """A fresh inspection on `path` brought to `state` by the right people."""
        made = self.open(path)
        steps = {
            path.name: [],
            "granted": [(path.reviewer, "granted")],
            "denied": [(path.reviewer, "denied")],
            "closed": [(path.reviewer, "granted"), (path.requester, "closed")],
        }[state]
        for who, to in steps:
            extra = {"reasonCode": "not-justified"} if to == "denied" else {}
            if to == "granted" and path.sensitive:
                extra = {"consentSnapshotId": consent_snapshot(self.member)}
            answer = self.move(who, made, to, **extra)
            assert answer.status_code == 200, (path.name, to, answer.content)
        assert self.state(made) == state
        return made

    def actor_for(self, path: Path, state: str, to: str) -> str:
        return path.requester if to == "closed" else path.reviewer


def test_every_move_from_every_state_on_every_path(ops, remembered, client_for, metric):
    member, _ = remembered
    console = Console(ops, member, client_for)
    attempts = rejected = accepted = 0
    for path in ROUTES:
        for state in (path.name, "granted", "denied", "closed"):
            resting = console.at(path, state)
            for to in STATES:
                attempts += 1
                who = console.actor_for(path, state, to)
                if to in LEGAL[state]:
                    fresh = console.at(path, state)
                    extra = {"reasonCode": "not-justified"} if to == "denied" else {}
                    if to == "granted" and path.sensitive:
                        extra = {"consentSnapshotId": consent_snapshot(member)}
                    answer = console.move(who, fresh, to, **extra)
                    assert answer.status_code == 200, (path.name, state, to, answer.content)
                    assert console.state(fresh) == to
                    accepted += 1
                    continue
                answer = console.move(who, resting, to)
                assert answer.status_code == 409, (path.name, state, to, answer.content)
                problem = answer.json()
                assert problem["code"] == "transition-not-allowed"
                assert problem["errors"][0]["field"] == "to"
                assert sorted(problem["errors"][0]["allowed"]) == sorted(LEGAL[state])
                assert console.state(resting) == state  # nothing moved
                rejected += 1
    # Per path: its two answers, and the close of a grant.
    assert accepted == len(ROUTES) * 3 and attempts == len(ROUTES) * 4 * len(STATES)
    metric(
        "inspection-state-machine",
        attempts=attempts,
        illegal_rejected=rejected,
        legal_accepted=accepted,
        illegal_accepted=0,
    )


def test_granted_reads_are_audited_and_a_sensitive_close_queues_the_members_notice(
    ops, remembered, client_for
):
    member, entries = remembered
    console = Console(ops, member, client_for)
    for path in ROUTES:
        made = console.at(path, "granted")
        before = AuditEvent.objects.filter(action="iris.admin_inspection.snapshot.viewed").count()
        for _ in range(2):
            read = console.clients[path.requester].get(f"{URL}/{made}/snapshot")
            assert read.status_code == 200, read.content
        viewed = AuditEvent.objects.filter(action="iris.admin_inspection.snapshot.viewed")
        assert viewed.count() == before + 2  # every read, not the first only
        shown = {i["entryId"] for i in read.json()["items"]}
        assert (str(entries["medical"].entry_id) in shown) == path.sensitive
        assert entries["medical"].body not in str([e.payload for e in viewed])
        closed = console.move(path.requester, made, "closed")
        assert closed.status_code == 200, closed.content
        owed = InspectionNotice.objects.filter(inspection_id=made)
        assert owed.count() == (1 if path.sensitive else 0), path.name
