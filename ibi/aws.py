"""AWS clients for the Lambdas, made by botocore itself.

``boto3.client`` would give the same clients, but importing boto3 imports s3transfer too (its
S3 upload and download managers, which no function uses): about 170 ms of every cold start.
Credentials, region and retries come from the environment exactly as boto3 would read them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import botocore.session
from botocore.config import Config


@lru_cache(maxsize=1)
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


def aws_client(service: str, *, config: Config | None = None) -> Any:
    """A low-level client of ``service`` (``dynamodb``, ``s3``, ``ssm``, ``secretsmanager``)."""
    return _session().create_client(service, config=config)
