"""What `manage.py doctor` and `/api/v1/health` ask of the apps.

An app registers its own health checks (`@checks.register(DOCTOR_TAG)`), so the kernel's
command never imports an app. The same way, an app may register a *health note*: a
callable returning a small mapping that `/api/v1/health` shows under its name. A note
describes how well the app works (for instance, recall ranking without its model); it
never turns the node unhealthy, so a load balancer keeps sending it traffic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

DOCTOR_TAG = "doctor"

HealthNote = Callable[[], Mapping[str, Any]]

_HEALTH_NOTES: dict[str, HealthNote] = {}


def register_health_note(name: str, note: HealthNote) -> None:
    """Show `note()` under `name` in `/api/v1/health` (registering a name again replaces it)."""
    _HEALTH_NOTES[name] = note


def health_notes() -> dict[str, Mapping[str, Any]]:
    return {name: note() for name, note in sorted(_HEALTH_NOTES.items())}
