"""The work a verified request asks for, run by `dsar.tasks.process`.

verified → in-progress → completed | failed, by Iris itself. Each kind's work lives in its
own module (`dsar.export`, `dsar.deletion`, `dsar.access`) and returns the result
fingerprint that binds the artifact to the request. Safe to run twice: a request already
finished is left as it is, one in progress goes on from where it stopped.
"""

from __future__ import annotations

import logging
import uuid

from django.db import transaction
from django.utils import timezone

from dsar.enums import RequestKind, RequestState
from dsar.models import DataRightsRequest
from dsar.selectors import active_hold
from dsar.services import _append, _locked
from governance.principal import Principal

log = logging.getLogger(__name__)
S = RequestState


def process(request_id: uuid.UUID) -> str:
    request = DataRightsRequest.objects.select_related("member").filter(id=request_id).first()
    if request is None:
        return "missing"
    system = Principal.system(tenant_id=request.tenant_id)
    if request.state == S.VERIFIED:
        if request.kind == RequestKind.DELETE and active_hold(request.member) is not None:
            return "held"
        with transaction.atomic(durable=True):
            request = _locked(request.id, request.tenant_id)
            if request.state != S.VERIFIED:
                return request.state
            _append(system, request, S.IN_PROGRESS, now=timezone.now())
    if request.state != S.IN_PROGRESS:
        return request.state
    if request.kind == RequestKind.DELETE and active_hold(request.member) is not None:
        return "held"
    runner = _runner(request.kind)
    try:
        fingerprint = runner(request)
    except Exception:
        log.exception("data-rights work failed", extra={"requestId": str(request.id)})
        with transaction.atomic(durable=True):
            request = _locked(request.id, request.tenant_id)
            if request.state == S.IN_PROGRESS:
                request.failure_code = "work-failed"
                _append(system, request, S.FAILED, now=timezone.now(), reason_code="work-failed")
        return "failed"
    if fingerprint is None:  # the work waits (e.g. a soft delete's grace window)
        return "waiting"
    with transaction.atomic(durable=True):
        request = _locked(request.id, request.tenant_id)
        if request.state != S.IN_PROGRESS:
            return request.state
        request.result_fingerprint = fingerprint
        _append(system, request, S.COMPLETED, now=timezone.now())
    return "completed"


def _runner(kind: str):
    if kind == RequestKind.EXPORT:
        from dsar.export import run_export

        return run_export
    if kind == RequestKind.DELETE:
        from dsar.deletion import run_deletion

        return run_deletion
    from dsar.access import run_access

    return run_access
