"""arklet's own settings, on SQLite in a temporary directory (the benchmark's peer).

Served by gunicorn with two sync worker processes sharing one SQLite file, so the file is
set up the way SQLite is run under concurrent writers: write-ahead log (readers never wait
for a writer), transactions that take the write lock when they begin (no deadlock between
two upgrading readers), and a busy timeout instead of an immediate "database is locked".
"""

import os

from arklet.entrypoints.settings import *  # noqa: F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["ARKLET_BENCH_DB"],
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
    }
}
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
LOGGING = {"version": 1, "disable_existing_loggers": True}
