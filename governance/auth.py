"""Bearer-token authentication for surface clients, and a per-principal rate limit."""

from __future__ import annotations

import hashlib
import secrets

from rest_framework import authentication, exceptions

from governance import plainsql
from governance.models import SurfaceClient
from governance.principal import SurfaceUser
from governance.throttle import WindowRateThrottle

TOKEN_PREFIX = "iris_"  # noqa: S105 - a prefix, not a secret


def hash_token(token: str) -> str:
    # Tokens are 256 random bits, so a plain SHA-256 is enough (no password stretching).
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class SurfaceTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):  # type: ignore[no-untyped-def]
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        client = _client_for(hash_token(parts[1]))
        if client is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        return SurfaceUser(client), client

    def authenticate_header(self, request) -> str:  # type: ignore[no-untyped-def]
        return f'{self.keyword} realm="iris"'


def _client_for(token_hash: str) -> SurfaceClient | None:
    # Every API request runs this: plain SQL (see governance.plainsql). Revocation still
    # takes effect on the next request.
    rows = plainsql.select(SurfaceClient, "token_hash = %s AND revoked_at IS NULL", [token_hash])
    return rows[0] if rows else None


class PrincipalRateThrottle(WindowRateThrottle):
    scope = "principal"

    def get_cache_key(self, request, view):  # type: ignore[no-untyped-def]
        user = request.user
        if isinstance(user, SurfaceUser):
            ident = f"surface:{user.pk}"
        elif user is not None and user.is_authenticated:
            ident = f"user:{user.pk}"
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
