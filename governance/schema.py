"""OpenAPI: the surface bearer token, and the problem codes each operation declares."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from governance.problems import PROBLEMS

PROBLEM_CODES_KEY = "x-problem-codes"


class SurfaceTokenScheme(OpenApiAuthenticationExtension):
    target_class = "governance.auth.SurfaceTokenAuthentication"
    name = "surfaceToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A surface client's token (`manage.py create_surface_client`).",
        }


def problems(*codes: str) -> dict[str, Any]:
    """`extend_schema(extensions=problems(...))`: the problem codes an operation can answer
    with besides the ones every call can meet (`iris_site.openapi` adds those and turns the
    list into documented responses)."""
    unknown = [code for code in codes if code not in PROBLEMS]
    if unknown:
        raise KeyError(f"problem codes missing from governance.problems: {unknown}")
    return {PROBLEM_CODES_KEY: list(codes)}
