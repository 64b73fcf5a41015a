"""A member sees an approval card in the browser and answers it: the held call then runs
(approve) or never does (deny). Plain forms, no script; axe-core finds nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import views as auth_views
from django.db import transaction
from django.urls import include, path
from playwright.sync_api import Page, expect

from governance import operations
from governance import views as governance_views
from governance.approvals import Resume, register_resumable
from governance.audit import Actor, audit_record
from governance.effects import run_destructive
from governance.kernel_models import Approval
from governance.models import AuditEvent, SurfaceClient, User
from governance.pipeline import Effect, HeldForApproval, Operation
from governance.principal import Principal

# The site's chrome and the approvals pages, whether or not iris_site.urls includes them yet.
urlpatterns = [
    path("", governance_views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("approvals/", include("governance.urls_approvals")),
]
pytestmark = [pytest.mark.browser, pytest.mark.urls(__name__)]

CLEARED = "iris.test.memory_cleared"


def clear_all(
    *, principal: Principal, member: User, approval_id: str | None = None, **_: Any
) -> dict[str, int]:
    op = Operation(
        name="memory.clear_all",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        attributes={"arguments": {"scope": "all"}, "approval_id": approval_id},
    )
    return run_destructive(op, _clear, member)


def _clear(member: User) -> dict[str, int]:
    with transaction.atomic(durable=True):
        audit_record(
            actor=Actor("system", "tests"),
            action=CLEARED,
            tenant_id=member.tenant_id,
            subject_ids=[member.public_id],
        )
    return {"cleared": 1}


def _resume(call: Resume) -> Any:
    member = User.objects.get(tenant_id=call.principal.tenant_id, public_id=call.member_id)
    return clear_all(
        principal=call.principal, member=member, approval_id=call.attributes["approval_id"]
    )


@pytest.fixture
def held(member, surface_token, monkeypatch) -> Approval:
    monkeypatch.setattr(operations, "_RESUMABLE", {})
    monkeypatch.setattr(operations, "_UNDO", {})
    register_resumable(
        "memory.clear_all", _resume, action="clear everything Iris remembers about you"
    )
    client = SurfaceClient.objects.get()
    surface = Principal("surface", client.id, client.tenant_id, surface=client.surface)
    with pytest.raises(HeldForApproval) as caught:
        clear_all(principal=surface, member=member)
    return Approval.objects.get(id=caught.value.extra["approvalId"])


def cleared() -> int:
    return AuditEvent.objects.filter(action=CLEARED).count()


def test_member_sees_and_approves_an_approval_card(page: Page, login, axe_check, held) -> None:
    login(page, "ada", "pw-ada", next_path="/approvals/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Approvals")
    card = page.get_by_role("article", name="A change that cannot be undone")
    expect(card).to_be_visible()
    expect(card).to_contain_text("The assistant app wants to clear everything Iris remembers")
    expect(page.get_by_role("link", name="Approvals")).to_have_attribute("aria-current", "page")
    axe_check(page)
    assert cleared() == 0

    card.get_by_role("button", name="Approve").click()

    expect(page.get_by_role("status")).to_have_text("Approved. The change was made.")
    expect(page.get_by_text("Nothing is waiting for your approval.")).to_be_visible()
    axe_check(page)
    held.refresh_from_db()
    assert held.status == "completed" and cleared() == 1


def test_member_denies_with_the_keyboard(page: Page, login, held) -> None:
    login(page, "ada", "pw-ada", next_path="/approvals/")
    deny = page.get_by_role("button", name="Deny")
    deny.focus()
    expect(deny).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_have_text("Denied. Nothing was changed.")
    held.refresh_from_db()
    assert held.status == "denied" and cleared() == 0
