"""SigV4 signing of requests to API Gateway's IAM-authorized routes, with the caller's AWS
credentials (botocore, imported only when a request is signed)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ibi.client.transport import ApiError

_AWS_API_HOST = re.compile(r"[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?")


def aws_region_of(endpoint: str) -> str | None:
    """The region of an API Gateway endpoint (``…execute-api.<region>.amazonaws.com``)."""
    match = _AWS_API_HOST.fullmatch(urlsplit(endpoint).hostname or "")
    return match.group(1) if match else None


class SigV4Signer:
    """Signs requests for API Gateway IAM authorization with the caller's AWS credentials."""

    def __init__(self, region: str) -> None:
        import botocore.session

        self.region = region
        self.credentials = botocore.session.get_session().get_credentials()

    @property
    def available(self) -> bool:
        return self.credentials is not None

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        if self.credentials is None:
            raise ApiError(0, "no AWS credentials to sign the request with")
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        frozen = self.credentials.get_frozen_credentials()
        SigV4Auth(frozen, "execute-api", self.region).add_auth(request)
        return dict(request.headers.items())


def signer_for(sign: bool | None, region: str | None) -> SigV4Signer | None:
    """A signer when asked to sign (``True``), or by default for an AWS endpoint."""
    if sign is False or (sign is None and region is None):
        return None
    if region is None:
        raise ApiError(0, "--sign needs --region for an endpoint outside *.amazonaws.com")
    signer = SigV4Signer(region)
    if signer.available:
        return signer
    if sign is True:
        raise ApiError(0, "--sign: no AWS credentials found")
    return None
