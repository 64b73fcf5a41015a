"""Pages shared by everyone: the home page routes members and operators."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from governance.models import User


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    # Behind login_required, so never the anonymous user.
    assert isinstance(user, User)
    if user.is_operator:
        context = {
            "roles": sorted(user.roles),
            "session_hours": settings.IRIS_OPERATOR_SESSION_MAX_SECONDS // 3600,
            "idle_minutes": settings.IRIS_OPERATOR_SESSION_IDLE_SECONDS // 60,
        }
        return render(request, "governance/console_home.html", context)
    return render(request, "governance/member_home.html", {})
