"""arklet's own settings, on SQLite in a temporary directory (the benchmark's peer)."""

import os

from arklet.entrypoints.settings import *  # noqa: F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["ARKLET_BENCH_DB"],
    }
}
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
LOGGING = {"version": 1, "disable_existing_loggers": True}
