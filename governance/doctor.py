"""What `manage.py doctor` asks of the apps: Django system checks with one tag.

An app registers its own health checks (`@checks.register(DOCTOR_TAG)`), so the kernel's
command never imports an app.
"""

from __future__ import annotations

DOCTOR_TAG = "doctor"
