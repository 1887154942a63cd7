"""Whether a request came through the edge: the header CloudFront adds, and the host it saw.

CloudFront sends every request it forwards with ``x-ibi-origin-verify`` (a generated secret,
infra/edge.py) and ``x-forwarded-host`` (the host the reader asked for, which the viewer
function copies before the origin's own host replaces it). A request without the secret came
to the API's ``execute-api`` address directly, around the web ACL: refused. A request with it
passes, and the host goes on to the function (``functions/shared/edge.py``'s ``public_base``)
so that links name the address readers use, never the API's.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping, Sequence
from typing import Any

SECRET_HEADER = "x-ibi-origin-verify"  # noqa: S105 (a header's name)
HOST_HEADER = "x-forwarded-host"
# A DNS name, as CloudFront accepts in Host: its own *.cloudfront.net name or an alias.
HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


def decide(headers: Mapping[str, str], keys: Sequence[bytes]) -> dict[str, Any]:
    """The authorizer's simple response: authorized with ``{"host": …}``, or not."""
    presented = (headers.get(SECRET_HEADER) or "").encode()
    host = (headers.get(HOST_HEADER) or "").strip().lower()
    verified = any(hmac.compare_digest(presented, key) for key in keys)
    if not verified or not HOST.fullmatch(host):
        return {"isAuthorized": False}
    return {"isAuthorized": True, "context": {"host": host}}
