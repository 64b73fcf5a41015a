"""Every pure rule raises the one RuleError, and one translator turns it into the 400."""

from __future__ import annotations

import pytest

from consent.ledger import ConsentRuleError
from governance.errors import ValidationFailed, invalid
from governance.rules import RuleError
from memory.continuity.rules import RuleViolation
from memory.rules.masking import MultiActorRuleError
from memory.rules.scopes import ScopeRuleError, validate_scope

CASES = [
    (ScopeRuleError("userId", "missing"), "userId", "missing", None),
    (MultiActorRuleError("relationshipNote", "too-long"), "relationshipNote", "too-long", None),
    (
        ConsentRuleError("surface", "unknown", ["web", "mobile"]),
        "surface",
        "unknown",
        ["web", "mobile"],
    ),
    (RuleViolation("token.ttlMs", "range", "ttlMs is out of range."), "token.ttlMs", "range", None),
]


@pytest.mark.parametrize(("error", "field", "rule", "allowed"), CASES)
def test_each_rule_error_is_the_one_kind_and_translates_the_same(error, field, rule, allowed):
    assert isinstance(error, RuleError)
    problem = invalid(error)
    assert isinstance(problem, ValidationFailed) and problem.status == 400
    assert (problem.field, problem.rule, problem.allowed) == (field, rule, allowed)
    assert problem.problem()["errors"][0]["field"] == field


def test_the_caller_may_name_the_field_better_and_word_the_detail():
    problem = invalid(ScopeRuleError("userId", "missing"), field="scope.userId", detail="Say who.")
    assert (problem.field, problem.rule, problem.detail) == ("scope.userId", "missing", "Say who.")


def test_an_unknown_scope_kind_lists_the_kinds():
    with pytest.raises(ScopeRuleError) as raised:
        validate_scope("galaxy", {})
    assert raised.value.rule == "unknown-kind" and "profile" in raised.value.allowed
    assert "galaxy" not in raised.value.message  # the caller's text is never repeated
