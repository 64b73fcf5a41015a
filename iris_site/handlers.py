"""Error pages: problem+json under /api/, plain pages elsewhere; never a stack trace."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from governance.errors import api_not_found, api_server_error


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return api_not_found(request)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return api_server_error(request)
    return render(request, "500.html", status=500)
