"""Calling Iris the way a client does, for the schema tests: through the WSGI application
(every middleware), with the schema Iris serves at /api/schema/ (schemathesis reads it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO

from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings

# The checks that ask "is this answer the one the schema documents?"; nothing else.
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@contextmanager
def wsgi_inside_the_test_transaction() -> Iterator[None]:
    """Django closes the connection around each request it serves; inside a test that would
    drop the test's transaction. Its own test client unhooks the same two signals."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        # A WSGI response nobody closed never sent `request_finished`: send it, so work a
        # request deferred runs and the next test is not taken to be inside a request.
        request_finished.send(sender=None)
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def seed_demo_token() -> str:
    """Seed the demo as `make run` does; the surface token it prints. Only the seeding runs
    with DEBUG (seed_demo refuses without it); the calls are answered as in production."""
    out = StringIO()
    with override_settings(DEBUG=True):
        call_command("seed_demo", stdout=out)
    found = re.search(r"\(shown once\): (\S+)", out.getvalue())
    assert found is not None, out.getvalue()
    return found.group(1)
