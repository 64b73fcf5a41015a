"""OpenAPI: describe the surface bearer token so the schema names it."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class SurfaceTokenScheme(OpenApiAuthenticationExtension):
    target_class = "governance.auth.SurfaceTokenAuthentication"
    name = "surfaceToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A surface client's token (`manage.py create_surface_client`).",
        }
