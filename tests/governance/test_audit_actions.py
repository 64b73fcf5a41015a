"""Every audit action is a member of `governance.actions.AuditAction`: no caller spells
one as a string, and every name follows the one grammar."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from governance.actions import FORMER_NAMES, AuditAction, decision_action, stored_names
from governance.pipeline import Verdict

ROOT = Path(__file__).resolve().parents[2]
APPS = ("governance", "consent", "memory", "dsar", "inspection", "iris_site", "events")
# `action=` means something else to these: argparse's store_true, and the plain-words
# phrase an approval shows the member ("forget a memory").
NOT_AUDIT = {"add_argument", "register_resumable", "describe_operation"}
AREAS = ("account", "admin_inspection", "consent", "dsar", "governance", "memory", "vault")
WORD = r"[a-z]+(?:_[a-z]+)*"
GRAMMAR = re.compile(rf"^iris\.(?:{'|'.join(AREAS)})\.{WORD}\.{WORD}$")
IRREGULAR_PAST = {"built", "forgotten", "reset", "sent", "set", "undone", "written"}
# The kernel's decisions end in the verdict (docs/decisions/layout.md, "Audit actions").
VERDICTS = {f"iris.governance.decision.{v.value}" for v in Verdict}
# The spec's canonical inspection event (spec: "Operator Inspection Regime"): three parts,
# ending in a noun, matched exactly by the audit platform's consumers
# (governance/actions.py, docs/decisions/inspection.md).
SPEC_NAMES = {"iris.admin_inspection.transition"}


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or path == ROOT / "governance" / "actions.py":
                continue
            yield path, ast.parse(path.read_text(), filename=str(path))


def _spelled(node: ast.AST) -> bool:
    """A string built in place: a literal, an f-string, or a sum with a literal in it."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _spelled(node.left) or _spelled(node.right)
    if isinstance(node, ast.IfExp):
        return _spelled(node.body) or _spelled(node.orelse)
    return False


def _name_of(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"


def test_no_audit_action_is_spelled_as_a_string() -> None:
    spelled: list[str] = []
    checked = 0
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name_of(node.func) not in NOT_AUDIT:
                for keyword in node.keywords:
                    if keyword.arg == "action":
                        checked += 1
                        if _spelled(keyword.value):
                            spelled.append(_where(path, keyword.value))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "action":
                        checked += 1
                        if _spelled(value):
                            spelled.append(_where(path, value))
    assert spelled == [], f"use governance.actions.AuditAction: {spelled}"
    # The walk reached the callers (every service records through `action=`).
    assert checked >= 40


def test_no_source_spells_an_action_name_anywhere() -> None:
    """Positional arguments and module constants too: a known name, current or former,
    appears only in governance/actions.py."""
    names = {a.value for a in AuditAction} | {n for old in FORMER_NAMES.values() for n in old}
    found = [
        f"{_where(path, node)} {node.value}"
        for path, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]
    assert found == []


def test_every_action_follows_the_grammar() -> None:
    wrong = [
        a.value for a in AuditAction if not GRAMMAR.match(a.value) and a.value not in SPEC_NAMES
    ]
    assert wrong == []
    # The exception is exactly the spec's name, and it is in use.
    assert SPEC_NAMES <= {a.value for a in AuditAction}


def test_every_action_ends_in_a_past_tense_verb_or_a_kernel_verdict() -> None:
    def past(outcome: str) -> bool:
        return any(w.endswith("ed") or w in IRREGULAR_PAST for w in outcome.split("_"))

    wrong = [
        a.value
        for a in AuditAction
        if a.value not in VERDICTS | SPEC_NAMES and not past(a.value.rsplit(".", 1)[1])
    ]
    assert wrong == []
    assert {a.value for a in AuditAction if a.value.startswith("iris.governance.decision.")} == (
        VERDICTS
    )


def test_every_action_is_described_in_one_line() -> None:
    bare = [a.value for a in AuditAction if not a.description.strip() or "\n" in a.description]
    assert bare == []
    assert len({a.value for a in AuditAction}) == len(AuditAction)


def test_every_verdict_has_its_decision_action() -> None:
    for verdict in Verdict:
        assert decision_action(verdict.value).value == f"iris.governance.decision.{verdict.value}"


def test_renamed_actions_are_still_found_under_their_former_names() -> None:
    current = {a.value for a in AuditAction}
    for action, former in FORMER_NAMES.items():
        assert not set(former) & current
        assert stored_names(action) == (action.value, *former)
    assert stored_names(AuditAction.MEMORY_ENTRY_RETENTION_REVIEW_FLAGGED) == (
        "iris.memory.entry.retention_review_flagged",
        "iris.memory.entry.retention_review_due",
    )
    assert stored_names(AuditAction.MEMORY_ENTRY_WRITTEN) == ("iris.memory.entry.written",)


def test_an_action_is_stored_as_its_plain_name() -> None:
    # A StrEnum member is the string itself: the column, the hash and every filter see
    # exactly the name.
    assert AuditAction.MEMORY_ENTRY_FORGOTTEN == "iris.memory.entry.forgotten"
    assert str(AuditAction.MEMORY_ENTRY_FORGOTTEN) == "iris.memory.entry.forgotten"
    assert f"{AuditAction.MEMORY_RECALL_RESOLVED}" == "iris.memory.recall.resolved"


def test_the_walk_sees_literals_f_strings_and_sums() -> None:
    def value(source: str) -> ast.AST:
        (statement,) = ast.parse(source).body
        assert isinstance(statement, ast.Expr)
        return statement.value

    assert _spelled(value('"iris.memory.entry.written"'))
    assert _spelled(value('f"iris.governance.approval.{status}"'))
    assert _spelled(value('"iris.governance.side_effect." + outcome'))
    assert _spelled(value('"a" if failed else "b"'))
    assert not _spelled(value("AuditAction.MEMORY_ENTRY_WRITTEN"))
    assert not _spelled(value("decision_action(verdict)"))
