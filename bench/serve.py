"""What the benches that run the README's production server share: a free port, a fresh
PostgreSQL database, and the production environment on the loopback."""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path
from urllib.parse import urlparse


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _admin(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    return parsed._replace(path="/postgres").geturl(), parsed.path.lstrip("/")


def recreate_database(url: str) -> None:
    import psycopg

    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def production_env(db_url: str, var_dir: Path, **overrides: str) -> dict[str, str]:
    """The environment of `DEBUG=0` Iris on plain HTTP on the loopback (no TLS proxy in
    front), with fresh secrets, its files under `var_dir`, and the per-principal API
    throttle lifted: one client writes a whole set."""
    from cryptography.fernet import Fernet

    env = dict(os.environ)
    env.update(
        DATABASE_URL=db_url,
        DJANGO_SETTINGS_MODULE="iris_site.settings",
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(50),
        IRIS_MASTER_KEY=Fernet.generate_key().decode(),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        SECURE_HSTS_SECONDS="0",
        IRIS_VAR_DIR=str(var_dir),
        IRIS_AUDIT_CHECKPOINT_PATH=str(var_dir / "checkpoints.jsonl"),
        IRIS_API_RATE="100000000/min",
        LOG_LEVEL="WARNING",
    )
    env.update(overrides)
    return env
