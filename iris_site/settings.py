"""Iris settings, read from the environment (see .env.example for every variable)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import environ
from csp.constants import NONE, SELF

from iris_site.env import (
    SettingsError,
    dev_master_key,
    dev_secret_key,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
    read_env_file,
    required_in_production,
)

BASE_DIR = Path(__file__).resolve().parent.parent
read_env_file(Path(env_str("IRIS_ENV_FILE") or BASE_DIR / ".env"))
VAR_DIR = Path(env_str("IRIS_VAR_DIR") or BASE_DIR / "var")

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = required_in_production("SECRET_KEY", debug=DEBUG, dev_value="") or dev_secret_key(
    VAR_DIR
)
# MultiFernet keys, newest first, comma-separated.
IRIS_MASTER_KEY = required_in_production(
    "IRIS_MASTER_KEY", debug=DEBUG, dev_value=""
) or dev_master_key(VAR_DIR)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise SettingsError("ALLOWED_HOSTS must be set when DEBUG is off (see .env.example)")

INSTALLED_APPS = [
    "governance.admin_site.IrisAdminConfig",  # django.contrib.admin, superusers, read-only
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_htmx",
    "governance",
    "consent",
    "memory",
    "memory.continuity",
    "dsar",
    "inspection",
    "events",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "governance.middleware.UsableQueryMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "iris_site.urls"
WSGI_APPLICATION = "iris_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "memory.context_processors.off_the_record",
            ]
        },
    }
]

DATABASES = {
    "default": environ.Env.db_url_config(
        env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'iris.sqlite3'}"
    )
}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# SQLite: a transaction takes the write lock when it begins (BEGIN IMMEDIATE), so a second
# writer waits up to `timeout` seconds for it. Under the default (DEFERRED) a transaction
# that read first and then writes cannot wait, and fails at once with "database is locked".
SQLITE_OPTIONS = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
else:
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # The stock backend, with a health check that sends no query (iris_site/postgresql).
        DATABASES["default"]["ENGINE"] = "iris_site.postgresql"
    _pg = DATABASES["default"].setdefault("OPTIONS", {})
    if env_bool("IRIS_DB_SERVER_BINDING", True):
        # Parameters bound by the server, so psycopg prepares a query after a few runs and
        # PostgreSQL stops re-planning it (planning was most of the database's CPU per write).
        _pg.update(server_side_binding=True, prepare_threshold=2)
    # Memory's working set is served from RAM: a random page costs about what a sequential
    # one does, not PostgreSQL's default 4x. With 4.0 the planner read a 10k member's every
    # row and sorted them where walking the recency index reads 96 (docs/performance.md).
    # Empty to leave the server's value (e.g. behind a pooler that refuses `options`).
    if env_str("IRIS_DB_RANDOM_PAGE_COST", "1.1"):
        _pg["options"] = f"-c random_page_cost={env_float('IRIS_DB_RANDOM_PAGE_COST', 1.1)}"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "governance.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
ANONYMOUS_USER_NAME = None  # guardian: no anonymous user row

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

REDIS_URL = env_str("REDIS_URL")
# Production runs jobs on a real worker: without DEBUG, no broker is an error unless jobs
# are asked to run in-process on purpose (a single-process install, the tests).
IRIS_EAGER_TASKS = env_bool("IRIS_EAGER_TASKS", DEBUG)
if not REDIS_URL and not IRIS_EAGER_TASKS:
    raise SettingsError(
        "REDIS_URL must be set when DEBUG is off (or IRIS_EAGER_TASKS=1 to run jobs in-process)"
    )
CACHES = (
    {"default": {"BACKEND": "iris_site.cache.RedisCache", "LOCATION": REDIS_URL}}
    if REDIS_URL
    else {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
)

# Celery: a Redis broker when configured, otherwise tasks run eagerly in-process.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "governance.auth.SurfaceTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["governance.parsers.StrictJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "governance.errors.problem_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["governance.auth.PrincipalRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"principal": env_str("IRIS_API_RATE", "6000/min")},
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Iris API",
    "DESCRIPTION": "Memory, recall, consent and continuity for the assistant's surfaces.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets that share a field name across components get names of their own.
    "ENUM_NAME_OVERRIDES": {
        "ProvenanceKindEnum": "iris_site.schema_enums.provenance_kinds",
        "DataRightsKindEnum": "iris_site.schema_enums.data_rights_kinds",
        "ProductSurfaceEnum": "iris_site.schema_enums.product_surfaces",
        "ConsentTypeEnum": "iris_site.schema_enums.consent_record_types",
        "ConsentStatusEnum": "iris_site.schema_enums.consent_record_statuses",
    },
    # Every operation's problems, from governance.problems (docs/decisions/api.md).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "iris_site.openapi.document_problems",
    ],
}
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("IRIS_MAX_BODY_BYTES", 256 * 1024)

# Security. Secure by default; DEBUG relaxes only what local HTTP needs.
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = 0 if DEBUG else env_int("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("IRIS_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
        "base-uri": [SELF],
        "object-src": [NONE],
    }
}

# Iris
IRIS_REQUIRE_SERVICES = env_bool("IRIS_REQUIRE_SERVICES", False)
IRIS_AUDIT_CHECKPOINT_PATH = Path(
    env_str("IRIS_AUDIT_CHECKPOINT_PATH") or VAR_DIR / "audit-checkpoints.jsonl"
)
# Seconds between opportunistic seals after commit in one process (0: seal after every commit).
IRIS_AUDIT_SEAL_INTERVAL = env_float("IRIS_AUDIT_SEAL_INTERVAL", 1.0)
IRIS_IDEMPOTENCY_TTL_HOURS = env_int("IRIS_IDEMPOTENCY_TTL_HOURS", 24)
# Longer than any request may run (gunicorn's worker timeout, 30 s by default).
IRIS_IDEMPOTENCY_LEASE_SECONDS = env_int("IRIS_IDEMPOTENCY_LEASE_SECONDS", 120)
# Recall's semantic term: hybrid (BM25 and the offline MiniLM embedding, part of the install;
# BM25 alone when the model cannot load, which doctor and /api/v1/health report), lexical
# (BM25) or jaccard (the spec's token overlap).
IRIS_RECALL_SEMANTIC = env_str("IRIS_RECALL_SEMANTIC", "hybrid")
# Seconds a process keeps BM25's collection statistics of one member's gated rows (0: count
# them on every recall). They weigh the lexical score only; docs/decisions/recall.md.
IRIS_RECALL_STATS_SECONDS = env_float("IRIS_RECALL_STATS_SECONDS", 30.0)
# Recall ranks from a per-worker snapshot of each member's rows, kept current by the change
# log (memory.recall.snapshot, docs/decisions/recall.md): on/off, seconds before a snapshot
# is rebuilt from scratch, rows a worker holds over all members, and how long the change
# log keeps a change (longer than a snapshot lives).
IRIS_RECALL_SNAPSHOT = env_bool("IRIS_RECALL_SNAPSHOT", True)
IRIS_RECALL_SNAPSHOT_SECONDS = env_float("IRIS_RECALL_SNAPSHOT_SECONDS", 600.0)
IRIS_RECALL_SNAPSHOT_ROWS = env_int("IRIS_RECALL_SNAPSHOT_ROWS", 60_000)
IRIS_RECALL_CHANGES_KEEP_SECONDS = env_int("IRIS_RECALL_CHANGES_KEEP_SECONDS", 1200)
# Seconds a member's writes must pause before a worker catches its snapshot up with those
# it left to the next look (0: the next recall does it).
IRIS_RECALL_TRAIL_SECONDS = env_float("IRIS_RECALL_TRAIL_SECONDS", 0.1)
# Seconds between a worker's looks at the members it recalled lately, between
# their recalls (0: none; memory.recall.snapshot._Follower).
IRIS_RECALL_FOLLOW_SECONDS = env_float("IRIS_RECALL_FOLLOW_SECONDS", 0.1)
# Mail (data-rights receipts and codes, notices): the console in development; production
# names its backend (e.g. django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST).
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Iris <no-reply@iris.invalid>")
# Data rights (docs/decisions/data-rights.md): where export bundles are built and kept, how
# long one can be downloaded, how long a verification code lives, and the erasure journal,
# which lives outside the database so that it survives restoring a backup.
IRIS_EXPORT_DIR = Path(env_str("IRIS_EXPORT_DIR") or VAR_DIR / "exports")
IRIS_EXPORT_TTL_HOURS = env_int("IRIS_EXPORT_TTL_HOURS", 72)
IRIS_DSAR_CODE_TTL_MINUTES = env_int("IRIS_DSAR_CODE_TTL_MINUTES", 30)
IRIS_ERASURE_JOURNAL_PATH = Path(
    env_str("IRIS_ERASURE_JOURNAL_PATH") or VAR_DIR / "erasure-journal.jsonl"
)
# The governance kernel (docs/decisions/governance-kernel.md).
IRIS_SIDE_EFFECT_LEDGER = env_bool("IRIS_SIDE_EFFECT_LEDGER", True)
IRIS_SIDE_EFFECT_LEDGER_ALL = env_bool("IRIS_SIDE_EFFECT_LEDGER_ALL", False)
IRIS_APPROVAL_TTL_HOURS = env_int("IRIS_APPROVAL_TTL_HOURS", 24)
IRIS_RUN_MAX_WRITES = env_int("IRIS_RUN_MAX_WRITES", 50)
IRIS_RUN_MAX_RECALLS = env_int("IRIS_RUN_MAX_RECALLS", 200)
IRIS_RUN_LOOP_REPEATS = env_int("IRIS_RUN_LOOP_REPEATS", 3)
IRIS_RUN_RETENTION_DAYS = env_int("IRIS_RUN_RETENTION_DAYS", 7)
# Continuity (memory.continuity.conf): the conflict window between two devices, how long an
# unwritten token lives, the expiry job's batch and the largest read.
IRIS_CONTINUITY_CONFLICT_WINDOW_SECONDS = env_int("IRIS_CONTINUITY_CONFLICT_WINDOW_SECONDS", 10)
IRIS_CONTINUITY_TOKEN_TTL_DAYS = env_int("IRIS_CONTINUITY_TOKEN_TTL_DAYS", 30)
IRIS_CONTINUITY_EXPIRY_BATCH = env_int("IRIS_CONTINUITY_EXPIRY_BATCH", 1000)
IRIS_CONTINUITY_READ_LIMIT_MAX = env_int("IRIS_CONTINUITY_READ_LIMIT_MAX", 50)
IRIS_TAINT_POLICY_PATH = Path(
    env_str("IRIS_TAINT_POLICY_PATH") or BASE_DIR / "config" / "governance" / "taint-policy.yaml"
)

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every handler scrubs secrets and masks personal identifiers before anything is written.
    "filters": {"redact": {"()": "governance.redaction_logging.RedactingFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.db.backends": {"level": "WARNING"},
    },
}

# Accounts and logins (docs/decisions/accounts.md). Kept in one block, appended to the
# lists above, so the rest of the settings read as before.
from datetime import timedelta  # noqa: E402

INSTALLED_APPS += ["axes"]
# Axes last: it turns a flagged lockout into the lockout page after every other middleware ran.
MIDDLEWARE += ["governance.middleware.OperatorSessionMiddleware", "axes.middleware.AxesMiddleware"]
# Axes first: a locked-out username or address is refused before its password is even checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", *AUTHENTICATION_BACKENDS]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"  # shared by every web process
AXES_FAILURE_LIMIT = env_int("IRIS_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("IRIS_LOGIN_COOLOFF_MINUTES", 15))
# Either count reaching the limit locks: one username tried from many addresses, or one
# address trying many usernames.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "governance.views_accounts.locked_out"
AXES_HTTP_RESPONSE_CODE = 429
# Successful logins go to the audit chain; axes keeps no second record of who signed in.
AXES_DISABLE_ACCESS_LOG = True
AXES_ENABLE_ADMIN = False
# No start-up banner, and axes' log lines name no username, address or user agent.
AXES_VERBOSE = False
# Behind a proxy, the client address is the one the last N trusted proxies saw.
if _proxies := env_int("IRIS_TRUSTED_PROXY_COUNT", 0):
    AXES_IPWARE_PROXY_COUNT = _proxies
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
# Members keep two weeks; an operator session ends after 10 hours, or 30 idle minutes.
SESSION_COOKIE_AGE = env_int("IRIS_MEMBER_SESSION_SECONDS", 14 * 24 * 3600)
IRIS_OPERATOR_SESSION_MAX_SECONDS = env_int("IRIS_OPERATOR_SESSION_MAX_SECONDS", 10 * 3600)
IRIS_OPERATOR_SESSION_IDLE_SECONDS = env_int("IRIS_OPERATOR_SESSION_IDLE_SECONDS", 30 * 60)
# Seconds between the password and the code of a two-step sign-in.
IRIS_LOGIN_SECOND_STEP_SECONDS = env_int("IRIS_LOGIN_SECOND_STEP_SECONDS", 300)
# axes logs every attempt at INFO; the audit chain already records them.
LOGGING["loggers"]["axes"] = {"level": "WARNING"}

# Events and webhooks (docs/decisions/events.md): hosts a webhook may point at (a name, or
# `.example.com` for a domain and everything under it), plain http to a loopback host (tests
# and development only), the POST timeout, attempts before a delivery fails, the first wait.
IRIS_WEBHOOK_ALLOWED_HOSTS = env_list("IRIS_WEBHOOK_ALLOWED_HOSTS", [])
IRIS_WEBHOOK_ALLOW_HTTP_LOOPBACK = env_bool("IRIS_WEBHOOK_ALLOW_HTTP_LOOPBACK", DEBUG)
IRIS_WEBHOOK_TIMEOUT_SECONDS = env_float("IRIS_WEBHOOK_TIMEOUT_SECONDS", 5.0)
IRIS_WEBHOOK_MAX_ATTEMPTS = env_int("IRIS_WEBHOOK_MAX_ATTEMPTS", 6)
IRIS_WEBHOOK_RETRY_SECONDS = env_float("IRIS_WEBHOOK_RETRY_SECONDS", 30.0)
# httpx logs each request's URL at INFO; a webhook's path or query may hold its owner's token.
LOGGING["loggers"]["httpx"] = {"level": "WARNING"}
