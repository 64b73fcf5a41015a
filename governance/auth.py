"""Bearer-token authentication for surface clients, and a per-principal rate limit."""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import TYPE_CHECKING

from rest_framework import authentication, exceptions

from governance import plainsql
from governance.models import SurfaceClient
from governance.principal import SurfaceUser
from governance.throttle import WindowRateThrottle

if TYPE_CHECKING:  # rest_framework.views imports the authentication classes: a cycle
    from rest_framework.request import Request
    from rest_framework.views import APIView

TOKEN_PREFIX = "iris_"  # noqa: S105 - a prefix, not a secret
# RFC 9110: an auth-scheme is a token; bearer credentials are token68 (RFC 6750).
_SCHEME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def hash_token(token: str) -> str:
    # Tokens are 256 random bits, so a plain SHA-256 is enough (no password stretching).
    return hashlib.sha256(token.encode()).hexdigest()


def bearer_token(header: str | bytes | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None when the header is
    absent or names another scheme (session auth may still apply); AuthenticationFailed
    for anything malformed.

    Parsed by hand, on ASCII spaces only: under gunicorn the header arrives decoded as
    latin-1, so `\\xa0` or `\\x85` are characters that `str.split()` takes for whitespace.
    """
    if not header:
        return None
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    scheme, _, credentials = header.partition(" ")
    if _SCHEME.fullmatch(scheme) and scheme.lower() != "bearer":
        return None
    if scheme.lower() != "bearer" or not _TOKEN68.fullmatch(credentials):
        raise exceptions.AuthenticationFailed("Malformed Authorization header.")
    return credentials


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class SurfaceTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[SurfaceUser, SurfaceClient] | None:
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
        if token is None:
            return None
        client = _client_for(hash_token(token))
        if client is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        return SurfaceUser(client), client

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="iris"'


def _client_for(token_hash: str) -> SurfaceClient | None:
    # Every API request runs this: plain SQL (see governance.plainsql). Revocation still
    # takes effect on the next request.
    rows = plainsql.select(SurfaceClient, "token_hash = %s AND revoked_at IS NULL", [token_hash])
    return rows[0] if rows else None


class PrincipalRateThrottle(WindowRateThrottle):
    scope = "principal"

    def get_cache_key(self, request: Request, view: APIView) -> str:
        user = request.user
        if isinstance(user, SurfaceUser):
            ident = f"surface:{user.pk}"
        elif user is not None and user.is_authenticated:
            ident = f"user:{user.pk}"
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
