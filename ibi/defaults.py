"""Defaults written once: the functions, the API clients, the CLI and the CDK app read them."""

from __future__ import annotations

RESOLVER_SERVICE_IBI = "J8LNKB5R7W/3FUQHC5"  # urlib.net's resolver service (seed 001 §8)
ADMIN_EMAIL = "admin@localhost"
URLKEY_TTL_SECONDS = 600  # how long an Archive honours a urlkey it issued (Table 5.1)
URLKEY_TTL_RANGE = (10, 86400)
OAI_PAGE_SIZE = 100  # records (or headers) in one OAI-PMH list answer (functions/archive/oai.py)
OAI_PAGE_SIZE_RANGE = (1, 1000)
IDEMPOTENCY_TTL_SECONDS = 7 * 24 * 3600
SERVE_INLINE_BYTES = 4 * 1024 * 1024  # larger files are served through a presigned S3 URL
