"""Query strings of the API carry no unusable text (`governance.text`): the JSON parser
guards bodies, this guards `?name=value`, so both refuse the same characters the same way."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from governance.errors import PROBLEM_CONTENT_TYPE, problem_body
from governance.text import UNUSABLE_MESSAGES, safe_field_name, unusable_rule


class UsableQueryMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/") and request.GET:
            for name, values in request.GET.lists():
                for text in (name, *values):
                    rule = unusable_rule(text)
                    if rule is not None:
                        return _refusal(safe_field_name(name) or "query", rule)
        return self.get_response(request)


def _refusal(field: str, rule: str) -> JsonResponse:
    message = UNUSABLE_MESSAGES[rule]
    body = problem_body(
        400,
        "validation-failed",
        "The request is not valid",
        f"Invalid field(s): {field}.",
        errors=[{"field": field, "rule": rule, "message": message}],
    )
    return JsonResponse(body, status=400, content_type=PROBLEM_CONTENT_TYPE)
