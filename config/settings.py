"""Settings, one module, read from the environment.

Every value comes through a small typed helper that fails loudly on a value it
cannot parse, so a typo in a deployment is an error at start-up rather than a
silently different behaviour.
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def _in_range(name: str, value, low, high):
    # `not low <= value` also refuses NaN, which compares false with everything.
    if (low is not None and not low <= value) or (high is not None and not value <= high):
        raise ImproperlyConfigured(f"{name} must be between {low} and {high}, got {value}")
    return value


def env_int(name: str, default: int, *, low: int | None = None, high: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    return _in_range(name, value, low, high)


def env_float(name: str, default: float, *, low: float | None = None, high: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    return _in_range(name, value, low, high)


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


DATA_DIR = Path(env_str("DATA_DIR", str(BASE_DIR / "data")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is off")
    SECRET_KEY = "insecure-development-key-only-for-debug"
# Earlier keys, still accepted for signed cookies and for decrypting the
# webhook secrets stored under them (feedback/encryption.py) after a rotation.
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",
    "django_celery_beat",
    "axes",
    "config",
    "feedback",
    "labeling",
    "exports",
    "rollouts",
    "notifications",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files answer here, before sessions and the database are touched.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.RefuseNulInUrl",
    # Before anything reads the body: a chunked one is read here, within the size limit.
    "config.middleware.ReadChunkedBody",
    "config.middleware.RefuseNulInFormBody",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a lockout into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# What a signed webhook delivery passes through (config.wsgi): the security
# headers and https redirect, the NUL and chunked-body guards, and the Host
# check (CommonMiddleware). Sessions, CSRF, users, messages, frame and CSP
# headers and login lockouts serve browsers; a delivery is authenticated by
# its signature alone, and skipping them saves about a tenth of its CPU.
WEBHOOK_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.RefuseNulInUrl",
    "config.middleware.ReadChunkedBody",
    "django.middleware.common.CommonMiddleware",
]

# How core.auth checks a bearer token on the JSON API.
API_TOKEN_AUTHENTICATOR = "feedback.tokens.authenticate_token"

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling: after 5 failures a username is locked for the address it
# came from, for a cool-off period, so nobody can lock a reviewer out for good.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

ROOT_URLCONF = "config.urls"

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
                "labeling.context_processors.roles",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'app.sqlite3'}")
# Health checks: a kept connection is tested (one SELECT 1) before a request
# first uses it, so one that PostgreSQL dropped while it sat idle (a restart,
# a failover, pg_terminate_backend) is replaced instead of failing a request
# in every server thread that held one.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=env_bool("DB_CONN_HEALTH_CHECKS", True),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server, the worker and beat share one file: WAL lets readers
    # work beside the single writer, and the timeout waits out short locks
    # instead of failing with "database is locked".
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not the in-memory default, so tests that write from several
    # threads meet the same locking as the running app.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}

# No inline scripts anywhere: page data travels as JSON (json_script) and
# behaviour lives in static/js. Inline style attributes stay allowed; they
# carry no code. The interactive API docs load Swagger's own bundle.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/api/docs"],
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Production is served over TLS, usually by gunicorn behind a proxy that
# terminates it. gunicorn believes the proxy's X-Forwarded-Proto only from the
# addresses in FORWARDED_ALLOW_IPS (loopback by default), so Django needs no
# SECURE_PROXY_SSL_HEADER, which would believe any client. With DEBUG off,
# cookies are Secure, plain http is redirected and browsers are told to stay
# on https; PLAIN_HTTP=1 opts out for runs over plain http (the tests, a trial
# on one machine). DEBUG implies it: `make run` serves plain http on loopback.
PLAIN_HTTP = env_bool("PLAIN_HTTP", DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not PLAIN_HTTP)
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not PLAIN_HTTP)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if PLAIN_HTTP else 365 * 24 * 3600, low=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where `collectstatic` gathers the files (the production start runs it).
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# With DEBUG off, WhiteNoise serves what collectstatic gathered: names carry a
# hash of the content, so browsers may keep a file for a year, and gzip copies
# lie beside them. Pages then need the collected manifest to name a file.
# STATIC_COLLECTED=0 serves the source folders instead, under their own names
# (DEBUG, and the tests: their live servers read the source folders).
STATIC_COLLECTED = env_bool("STATIC_COLLECTED", not DEBUG)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if STATIC_COLLECTED
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# Uncollected, WhiteNoise looks each file up in the source folders on request
# (and does not expect STATIC_ROOT to exist); collected, it indexes STATIC_ROOT
# once at start-up.
WHITENOISE_USE_FINDERS = not STATIC_COLLECTED
WHITENOISE_AUTOREFRESH = not STATIC_COLLECTED

EXPORT_ROOT = Path(env_str("EXPORT_ROOT", str(DATA_DIR / "exports")))
# A train export leaves out anything at least this cosine-similar to an eval item.
HOLDOUT_SIMILARITY = env_float("HOLDOUT_SIMILARITY", 0.92)
EXPORT_STUCK_SECONDS = env_int("EXPORT_STUCK_SECONDS", 600)
APP_VERSION = env_str("APP_VERSION", "")  # empty: the manifest records the checked-out commit

# Ingestion limits (design.md: webhook contract).
WEBHOOK_MAX_BODY_BYTES = env_int("WEBHOOK_MAX_BODY_BYTES", 5 * 1024 * 1024)
WEBHOOK_MAX_BATCH_EVENTS = env_int("WEBHOOK_MAX_BATCH_EVENTS", 1000)
WEBHOOK_TOLERANCE_SECONDS = env_int("WEBHOOK_TOLERANCE_SECONDS", 5 * 60)
# Django refuses bodies above this before a view sees them; keep it just above
# the webhook limit so the view can answer 413 itself with a JSON error.
DATA_UPLOAD_MAX_MEMORY_SIZE = WEBHOOK_MAX_BODY_BYTES + 1024

# Items left unprocessed longer than this are queued again by the sweeper.
SWEEPER_GRACE_SECONDS = env_int("SWEEPER_GRACE_SECONDS", 60)
PIPELINE_MAX_ATTEMPTS = env_int("PIPELINE_MAX_ATTEMPTS", 5)
# Most items one embedding task takes of those that single events left waiting
# (feedback.pipeline); the model embeds in calls of up to 256 texts.
PIPELINE_BATCH_SIZE = env_int("PIPELINE_BATCH_SIZE", 256, low=1, high=5000)
# How long a woken worker waits for more single events before it claims (Redis broker only).
PIPELINE_GATHER_SECONDS = env_float("PIPELINE_GATHER_SECONDS", 0.1, low=0.0, high=5.0)
# Off: each single event queues a task with its own id, as before batching (bench/pipeline.py's baseline).
PIPELINE_COALESCE_SINGLE_EVENTS = env_bool("PIPELINE_COALESCE_SINGLE_EVENTS", True)

# Celery: Redis when REDIS_URL is set, otherwise kombu's filesystem transport
# under data/, so the embedded default needs no server.
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Longer than the longest task time limit, so a running task is never
        # handed to a second worker while the first still works on it.
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600),
        "socket_connect_timeout": 2,
        "socket_timeout": 5,
        # A web request that publishes must not hang on a dead broker: one
        # quick try, then the item waits for the sweeper.
        "max_retries": 1,
        "interval_start": 0,
        "interval_step": 0.2,
        "interval_max": 0.2,
    }
else:
    broker_dir = DATA_DIR / "broker"
    for sub in ("out", "processed", "control"):
        (broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(broker_dir / "out"),
        "data_folder_out": str(broker_dir / "out"),
        "processed_folder": str(broker_dir / "processed"),
        "control_folder": str(broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 900)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# Declared, not only routed to, so workers, purges and inspection know both.
CELERY_TASK_QUEUES = (Queue("default"), Queue("embed"))
# Each task declares its name and queue where it is defined (`@shared_task(name=..., queue=...)`):
# the names are saved in beat's PeriodicTask rows, so moving a module must not change them.
# The routes repeat the embed queue by name for producers that send a task by its name before
# their Celery app has loaded the tasks (`celery call`, another service); tests/core/test_task_names.py
# holds the two to each other.
CELERY_TASK_ROUTES = {
    name: {"queue": "embed"}
    for name in ("feedback.tasks.embed_items", "feedback.tasks.embed_waiting", "feedback.tasks.reembed_items")
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own console handler (DEBUG only) would print each record a second time beside root's.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.db.backends": {"level": "WARNING"},
    },
}

# Clustering and assignment (figures behind the defaults: README, "Clustering").
# 0.65: below it an assignment is more often wrong than right (bench/cluster_quality.py --assignment).
ASSIGN_SIMILARITY_THRESHOLD = env_float("ASSIGN_SIMILARITY_THRESHOLD", 0.65)
CATEGORY_MATCH_SIMILARITY = env_float("CATEGORY_MATCH_SIMILARITY", 0.8)
CLUSTER_RUN_STUCK_SECONDS = env_int("CLUSTER_RUN_STUCK_SECONDS", 15 * 60)
# How coarse categories are (labeling.clustering.algorithm.ClusterParams; the defaults
# suit banking77). Feedback whose wording varies more within one failure mode
# may want coarser ones: bench/cluster_demo.py measures the demo corpus.
CLUSTER_MERGE_THRESHOLD = env_float("CLUSTER_MERGE_THRESHOLD", 0.045, low=0.001, high=1.0)
CLUSTER_MERGE_MIN_ITEMS = env_int("CLUSTER_MERGE_MIN_ITEMS", 1000, low=1, high=10_000_000)
CLUSTER_MIN_CLUSTER_SIZE = env_int("CLUSTER_MIN_CLUSTER_SIZE", 5, low=1, high=10_000)


def env_crontab(name: str, default: str) -> crontab:
    raw = env_str(name, default)
    fields = raw.split()
    if len(fields) != 5:
        raise ImproperlyConfigured(f"{name} must be a cron expression with 5 fields, got {raw!r}")
    minute, hour, day_of_month, month_of_year, day_of_week = fields
    return crontab(minute, hour, day_of_week, day_of_month, month_of_year)


CELERY_BEAT_SCHEDULE = {
    "sweep-unprocessed-items": {
        "task": "feedback.tasks.sweep_unprocessed",
        "schedule": float(env_int("SWEEPER_INTERVAL_SECONDS", 60)),
    },
    # The reviewer pages' pre-aggregated counts (labeling.counts): changes folded in.
    "compact-counts": {
        "task": "labeling.tasks.compact_counts",
        "schedule": float(env_int("COUNTS_COMPACT_SECONDS", 60, low=5)),
    },
    "nightly-clustering": {
        "task": "labeling.tasks.scheduled_clustering",
        "schedule": env_crontab("CLUSTER_SCHEDULE_CRON", "30 2 * * *"),
    },
    # Notifications out (notifications/): pinned comparisons are checked for regressions,
    # newly failed items announced, and deliveries whose task was lost queued again.
    "notify-check-regressions": {
        "task": "notifications.tasks.check_regressions",
        "schedule": float(env_int("NOTIFY_REGRESSION_CHECK_SECONDS", 3600, low=60)),
    },
    "notify-check-pipeline-failures": {
        "task": "notifications.tasks.check_pipeline_failures",
        "schedule": float(env_int("NOTIFY_PIPELINE_CHECK_SECONDS", 60, low=10)),
    },
    "notify-sweep-deliveries": {
        "task": "notifications.tasks.sweep_deliveries",
        "schedule": 60.0,
    },
}

# Notifications out. Outgoing requests time out after NOTIFY_TIMEOUT_SECONDS; a failed
# delivery is retried after 30 s, 60 s, 120 s ... (doubling, capped at an hour) until
# NOTIFY_MAX_ATTEMPTS attempts have failed. Links in messages start with SITE_URL.
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
NOTIFY_TIMEOUT_SECONDS = env_float("NOTIFY_TIMEOUT_SECONDS", 10.0, low=0.1, high=120)
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 8, low=1, high=30)
NOTIFY_RETRY_BASE_SECONDS = env_float("NOTIFY_RETRY_BASE_SECONDS", 30.0, low=0, high=3600)
NOTIFY_RETRY_MAX_SECONDS = env_float("NOTIFY_RETRY_MAX_SECONDS", 3600.0, low=0, high=86400)
# A category a cluster run created is announced once it holds this many items (within its first N days).
NOTIFY_NEW_CATEGORY_MIN_ITEMS = env_int("NOTIFY_NEW_CATEGORY_MIN_ITEMS", 20, low=1)
NOTIFY_NEW_CATEGORY_DAYS = env_int("NOTIFY_NEW_CATEGORY_DAYS", 30, low=1)
# A flagged regression is announced again only after it went unflagged this long.
NOTIFY_REGRESSION_QUIET_DAYS = env_int("NOTIFY_REGRESSION_QUIET_DAYS", 7, low=0)
