"""Real Celery worker against Redis, `check --deploy`, and the setup commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.helpers_celery import celery_worker

ROOT = Path(__file__).resolve().parents[2]


def test_real_celery_worker_runs_a_task(require_redis, tmp_path, monkeypatch) -> None:
    from governance.tasks import ping
    from iris_site.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", False)
    assert app.conf.broker_url.startswith("redis://")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "iris_site.settings_test"}
    log = tmp_path / "worker.log"
    with celery_worker(env, log):
        result = ping.delay("iris")
        assert result.get(timeout=60) == "pong:iris"
    assert "governance.tasks.ping" in log.read_text()


def test_production_settings_use_the_redis_broker_or_run_eagerly() -> None:
    env = dict(os.environ)
    code = (
        "import iris_site.settings as s;"
        "print(s.CELERY_TASK_ALWAYS_EAGER, s.CELERY_BROKER_URL.split(':')[0])"
    )
    for redis_url, expected in (("redis://127.0.0.1:6379/15", "False redis"), ("", "True memory")):
        env.update(REDIS_URL=redis_url, DEBUG="1")
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.stdout.strip().splitlines()[-1] == expected, done.stderr


def test_check_deploy_prints_no_warning_with_production_env(tmp_path) -> None:
    from cryptography.fernet import Fernet

    env = {
        k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "IRIS_MASTER_KEY"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="iris_site.settings",
        DEBUG="0",
        SECRET_KEY="prod-" + "x7Q9" * 16,
        IRIS_MASTER_KEY=Fernet.generate_key().decode(),
        ALLOWED_HOSTS="iris.example",
        IRIS_VAR_DIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "WARNING" not in output.upper().replace("FAIL-LEVEL", "")
    assert "no issues" in output


def _manage(args: list[str], tmp_path, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "IRIS_MASTER_KEY", "DEBUG"}
    }
    env.update(DJANGO_SETTINGS_MODULE="iris_site.settings", IRIS_VAR_DIR=str(tmp_path))
    env.update(env_vars)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_refuses_to_start_without_secrets_in_one_line(tmp_path) -> None:
    done = _manage(["check"], tmp_path, DEBUG="0", IRIS_ENV_FILE=os.devnull)
    assert done.returncode != 0
    assert done.stderr.startswith("iris: SECRET_KEY must be set when DEBUG is off")
    assert done.stderr.strip().count("\n") == 0
    assert "Traceback" not in done.stderr


def test_a_checkout_without_environment_says_how_to_get_development_mode(tmp_path) -> None:
    done = _manage(["create_surface_client", "--tenant", "x"], tmp_path, IRIS_ENV_FILE=os.devnull)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "make run" in done.stderr


def test_commands_run_in_development_mode_from_the_env_file_make_run_writes(tmp_path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("# Written by make run\nDEBUG=1\n")
    done = _manage(["check"], tmp_path, IRIS_ENV_FILE=str(env_file))
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout
    # The process environment wins over the file: production settings still refuse.
    done = _manage(["check"], tmp_path, IRIS_ENV_FILE=str(env_file), DEBUG="0")
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr


def test_make_run_writes_the_development_env_file_and_git_ignores_it() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run: install \.env$", makefile, re.M)
    assert re.search(r"^\.env:\n\tprintf .*DEBUG=1", makefile, re.M)
    assert ".env" in (ROOT / ".gitignore").read_text().split()


@pytest.mark.django_db
def test_setup_commands_create_what_they_say(capsys) -> None:
    from governance.models import SurfaceClient, Tenant, User

    call_command("create_tenant", "initech", "--name", "Initech")
    call_command("create_user", "milton", "--tenant", "initech", "--role", "legal")
    call_command("create_user", "peter", "--tenant", "initech")
    call_command("create_surface_client", "--tenant", "initech", "--surface", "tara")
    out = capsys.readouterr().out
    tenant = Tenant.objects.get(slug="initech")
    milton = User.objects.get(username="milton")
    assert milton.is_operator and milton.roles == {"legal"}
    assert milton.has_perm("governance.work_data_rights", tenant)
    assert not User.objects.get(username="peter").is_operator
    token = out.split("token (shown once): ")[1].split()[0]
    assert SurfaceClient.objects.get(tenant=tenant).token_hash != token
    call_command("doctor")
    assert "doctor: all good" in capsys.readouterr().out


@pytest.mark.django_db
def test_operator_permissions_stay_inside_their_tenant(tenant, other_tenant, make_operator) -> None:
    legal = make_operator("legal")
    support = make_operator("support")
    assert legal.has_perm("governance.work_data_rights", tenant)
    assert not legal.has_perm("governance.work_data_rights", other_tenant)
    assert not support.has_perm("governance.work_data_rights", tenant)
    assert support.has_perm("governance.request_inspection", tenant)


@pytest.mark.django_db
def test_seed_demo_prints_logins(capsys, settings) -> None:
    settings.DEBUG = True  # seed_demo refuses to run without it
    call_command("seed_demo")
    out = capsys.readouterr().out
    assert "demo-member" in out and "demo-trust-and-safety" in out and "iris_" in out
    from governance.models import SurfaceClient, User

    # The demo assistant is an on-device one: its recalls may carry the member's memories.
    assert "local tier" in out
    live = SurfaceClient.objects.get(surface="assistant", revoked_at__isnull=True)
    assert live.destination_tier == "local"
    from memory.models import MemoryEntry, PendingConflict

    member = User.objects.get(username="demo-member")
    # The five memories, a guess, a conversation's memory, a notebook's and a favourite
    # colour whose second value waits as a question.
    assert MemoryEntry.objects.filter(member=member, is_current=True).count() == 9
    mine = MemoryEntry.objects.filter(member=member, is_current=True)
    assert mine.filter(origin="model-inferred", lifecycle="draft").count() == 1
    assert mine.filter(scope_kind="notebook").count() == 1
    assert PendingConflict.objects.filter(member=member, status="open").count() == 1
    call_command("seed_demo")  # a second run adds no duplicates
    assert MemoryEntry.objects.filter(member=member, is_current=True).count() == 9


def test_production_refuses_to_start_without_a_broker(tmp_path) -> None:
    done = _manage(
        ["check"],
        tmp_path,
        DEBUG="0",
        SECRET_KEY="s" * 50,
        IRIS_MASTER_KEY="qDyBtHbH3rYqZfHqWvKp0hJ8p6hVqCk7m1sVx2rF8uA=",
        ALLOWED_HOSTS="iris.example",
        REDIS_URL="",
        IRIS_EAGER_TASKS="0",
        IRIS_ENV_FILE=os.devnull,
    )
    assert done.returncode != 0
    assert done.stderr.startswith("iris: REDIS_URL must be set when DEBUG is off")
