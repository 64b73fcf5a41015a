"""Small strict readers for the environment. Settings fail closed: without DEBUG, a missing
secret stops start-up with a clear message instead of running with a default."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


class SettingsError(ImproperlyConfigured):
    """A missing or malformed environment variable: manage.py, wsgi and Celery report it in
    one line instead of a traceback."""


def read_env_file(path: Path) -> None:
    """Load a checkout's `.env` (what `make run` writes); the process environment wins."""
    if path.is_file():
        import environ

        environ.Env.read_env(path, overwrite=False)


def exit_on_settings_error(exc: SettingsError) -> None:
    sys.exit(f"iris: {exc}")


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise SettingsError(f"{name} must be one of 1/0/true/false, not {raw!r}")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise SettingsError(f"{name} must be an integer, not {raw!r}") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise SettingsError(f"{name} must be a number, not {raw!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def required_in_production(name: str, *, debug: bool, dev_value: str) -> str:
    value = env_str(name)
    if value:
        return value
    if not debug:
        raise SettingsError(
            f"{name} must be set when DEBUG is off (see .env.example; in a development "
            "checkout, `make run` writes a .env that turns DEBUG on)"
        )
    return dev_value


def dev_master_key(var_dir: Path) -> str:
    """Generate (once) and reuse a development master key under var/, loudly."""
    from cryptography.fernet import Fernet

    path = var_dir / "dev-master-key"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(Fernet.generate_key().decode())
        path.chmod(0o600)
        print(
            f"WARNING: IRIS_MASTER_KEY is not set; generated a development key in {path}. "
            "Never use it in production.",
            file=sys.stderr,
        )
    return path.read_text().strip()


def dev_secret_key(var_dir: Path) -> str:
    path = var_dir / "dev-secret-key"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()
