"""Error pages: problem+json under /api/, plain pages elsewhere; never a stack trace."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from governance.errors import PROBLEM_CONTENT_TYPE, api_not_found, api_server_error, problem_body


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(
            problem_body(403, "forbidden", "Forbidden", "You may not do this."),
            status=403,
            content_type=PROBLEM_CONTENT_TYPE,
        )
    return render(request, "403.html", status=403)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return api_not_found(request)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return api_server_error(request)
    return render(request, "500.html", status=500)
