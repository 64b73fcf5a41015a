"""Pages shared by everyone: the home page routes members and operators."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    if user.is_operator:
        return render(request, "governance/console_home.html", {"roles": sorted(user.roles)})
    return render(request, "governance/member_home.html", {})
