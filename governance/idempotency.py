"""`Idempotency-Key` for every mutating endpoint.

The key is reserved before the operation runs (a unique row per client and key), so two
concurrent calls with one key cannot both run. The first answer is stored and replayed;
the same key with a different body is a 422. Server errors release the key so the client
may retry; a reservation older than IRIS_IDEMPOTENCY_LEASE_SECONDS (its worker died before
storing the answer) is taken over by the next retry. Stored answers are dropped after
IRIS_IDEMPOTENCY_TTL_HOURS and when the member they concern is forgotten.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from governance.errors import PROBLEM_CONTENT_TYPE, PROBLEM_TYPE, problem_body, problem_response
from governance.models import IdempotencyRecord
from governance.principal import principal_of

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
# Handlers that take the header: the OpenAPI schema documents it (and its problems) on them.
IDEMPOTENT_HANDLERS: set[Callable[..., Response]] = set()


def _fingerprint(request: Request) -> str:
    # Django sets the method of every request it dispatches; None is only a bare HttpRequest().
    assert request.method is not None
    digest = hashlib.sha256()
    digest.update(request.method.encode())
    digest.update(b"\0")
    digest.update(request.get_full_path().encode())
    digest.update(b"\0")
    digest.update(request.body)
    return digest.hexdigest()


def idempotent(handler: Callable[..., Response]) -> Callable[..., Response]:
    """Decorate an APIView method (post/patch/put/delete)."""

    @functools.wraps(handler)
    def wrapper(view, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER)
        if key is None:
            return handler(view, request, *args, **kwargs)
        if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
            return problem_response(
                problem_body(
                    400,
                    "validation-failed",
                    "The request is not valid",
                    f"{HEADER} must be 1-{MAX_KEY_LENGTH} printable characters.",
                    errors=[{"field": HEADER, "rule": "format", "message": "1-255 printable"}],
                )
            )
        principal = principal_of(request.user).key
        fingerprint = _fingerprint(request)
        reserved = _reserve(principal, key, fingerprint)
        if isinstance(reserved, Response):
            return reserved
        try:
            try:
                response = handler(view, request, *args, **kwargs)
            except Exception as exc:
                response = view.handle_exception(exc)
            if response.status_code >= 500:
                _release(reserved)
                return response
            IdempotencyRecord.objects.filter(pk=reserved).update(
                status_code=response.status_code,
                response_body=response.data,
                subject_id=getattr(request, "idempotency_subject", None),
            )
        except BaseException:
            # An uncaught error (a 500, or the worker being told to exit) must not leave
            # the key reserved: the operation's transaction rolled back, so a retry is safe.
            _release(reserved)
            raise
        return response

    IDEMPOTENT_HANDLERS.add(wrapper)
    return wrapper


def _reserve(principal: str, key: str, fingerprint: str) -> int | Response:
    """The reservation's id when this request may run; otherwise the answer to give."""
    try:
        with transaction.atomic():
            return IdempotencyRecord.objects.create(
                principal=principal, key=key, request_fingerprint=fingerprint
            ).pk
    except IntegrityError:
        pass
    record = IdempotencyRecord.objects.filter(principal=principal, key=key).first()
    if record is not None and record.request_fingerprint != fingerprint:
        return problem_response(
            problem_body(
                422,
                "idempotency-key-reused",
                "Idempotency key reused",
                f"This {HEADER} was used with a different request.",
            )
        )
    if record is None or record.status_code is None:
        if record is not None and _take_over_stale(record.pk):
            return record.pk
        return problem_response(
            problem_body(
                409,
                "idempotency-in-progress",
                "Request in progress",
                f"A request with this {HEADER} is still running; retry shortly.",
            ),
            headers={"Retry-After": "1"},
        )
    # A problem replays as one, the 202 of a call held for approval included.
    body = record.response_body
    is_problem = isinstance(body, dict) and str(body.get("type", "")).startswith(PROBLEM_TYPE)
    content_type = PROBLEM_CONTENT_TYPE if record.status_code >= 400 or is_problem else None
    return Response(
        record.response_body,
        status=record.status_code,
        content_type=content_type,
        headers={"Idempotent-Replayed": "true"},
    )


def _take_over_stale(record_id: int) -> bool:
    """A reservation older than the lease belongs to a worker that died before it stored
    its answer (gunicorn kills a worker long before the lease runs out). One retry takes
    it over, atomically; see docs/decisions/hardening-input.md for why re-running is safe."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.IRIS_IDEMPOTENCY_LEASE_SECONDS)
    taken = IdempotencyRecord.objects.filter(
        pk=record_id, status_code__isnull=True, created_at__lt=cutoff
    ).update(created_at=now)
    return taken == 1


def _release(record_id: int) -> None:
    try:
        IdempotencyRecord.objects.filter(pk=record_id, status_code__isnull=True).delete()
    except Exception:
        # The stale lease frees the key if even this fails (the database went away).
        log.exception("could not release an idempotency reservation")


def expire_records(*, now: datetime | None = None, batch: int = 5000) -> int:
    cutoff = (now or timezone.now()) - timedelta(hours=settings.IRIS_IDEMPOTENCY_TTL_HOURS)
    ids = list(
        IdempotencyRecord.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)[:batch]
    )
    IdempotencyRecord.objects.filter(pk__in=ids).delete()
    return len(ids)


def forget_subject(subject_id: uuid.UUID) -> int:
    """Drop stored answers about a member (they may quote what was forgotten)."""
    deleted, _ = IdempotencyRecord.objects.filter(subject_id=subject_id).delete()
    return deleted
