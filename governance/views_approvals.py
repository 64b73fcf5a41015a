"""The member's approvals page: a card per waiting call, answered with a plain POST form.

No script needed: each card is a form with two submit buttons (approve, deny), CSRF
protected, and the answer comes back as a message on the page the member came from
(`next`, same site only). Operators get 403: approvals are the member's to answer.
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from governance import approvals
from governance.errors import IrisError, NotFound
from governance.kernel_models import Approval
from governance.models import User
from governance.principal import principal_of

# What the member reads after answering, by how the resumed call went.
RESUME_MESSAGES = {
    "completed": "Approved. The change was made.",
    "not-resumable": "Approved. The app that asked can now make the change.",
    "requester-revoked": "Approved, but the app that asked is no longer connected; "
    "nothing was changed.",
}


def _member_only(request: HttpRequest) -> User:
    user = request.user
    # Behind login_required, so never the anonymous user.
    assert isinstance(user, User)
    if user.is_operator:
        raise PermissionDenied("Approvals are answered by the member they concern.")
    return user


def _next_url(request: HttpRequest) -> str:
    candidate = request.POST.get("next", "")
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return reverse("approvals")


@login_required
@require_GET
def approvals_page(request: HttpRequest) -> HttpResponse:
    member = _member_only(request)
    pending = approvals.approvals_pending_for(member=member)
    return render(
        request,
        "governance/approvals.html",
        {"approvals": pending, "next": request.get_full_path()},
    )


@login_required
@require_POST
def approval_decide_page(request: HttpRequest, approval_id: uuid.UUID) -> HttpResponse:
    _member_only(request)
    decision = request.POST.get("decision", "")
    try:
        outcome = approvals.approval_decide(
            principal=principal_of(request.user), approval_id=approval_id, decision=decision
        )
    except NotFound:
        raise Http404("No such approval.") from None
    except IrisError as exc:
        if exc.code == "approval-already-decided":
            messages.error(request, "This request was already answered; nothing changed.")
        elif exc.code == "approval-expired":
            messages.error(request, "This request has expired; nothing changed.")
        else:
            messages.error(request, "Choose Approve or Deny.")
        return HttpResponseRedirect(_next_url(request))
    if outcome.approval.status == Approval.Status.DENIED:
        messages.success(request, "Denied. Nothing was changed.")
    else:
        text = RESUME_MESSAGES.get(
            outcome.resume_code, "Approved, but the change could not be made; nothing was changed."
        )
        level = messages.SUCCESS if outcome.resume_code in RESUME_MESSAGES else messages.ERROR
        if outcome.resume_code == "requester-revoked":
            level = messages.ERROR
        messages.add_message(request, level, text)
    return HttpResponseRedirect(_next_url(request))
