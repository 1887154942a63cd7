"""Issue 26 item 6: a missing or undecryptable join parameter is logged; the Archive serves."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from functions.archive import wiring
from functions.archive.settings import ArchiveSettings

SETTINGS = ArchiveSettings.from_environment(
    {
        "IBI_ARCHIVE_TABLE": "items",
        "IBI_JOIN_RESOLVER_URL": "https://urlib.example.org",
        "IBI_REGISTRATION_KEY_PARAMETER": "/ibi/archive/registration-key",
    }
)


class Ssm:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def get_parameter(self, **kwargs: Any) -> dict[str, Any]:
        raise self.error


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}}, "GetParameter")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (client_error("ParameterNotFound"), "ParameterNotFound"),
        (client_error("AccessDeniedException"), "AccessDeniedException"),  # a KMS key of its own
        (EndpointConnectionError(endpoint_url="https://ssm"), "Could not connect"),
    ],
)
def test_the_join_logs_an_unreadable_key_and_returns(
    error: Exception, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[Any] = []
    monkeypatch.setattr("ibi.client.send_switch", lambda *a, **k: sent.append(k) or "")
    warnings: list[dict[str, Any]] = []
    monkeypatch.setattr(
        wiring.logger, "warning", lambda message, extra: warnings.append({"m": message, **extra})
    )
    join = wiring.switch_on(
        SETTINGS, wiring.parameter_reader(Ssm(error), "/ibi/archive/registration-key")
    )
    join("https://archive.example.org", "archive.example.org", "8JMKD3MGP8W/3FSUP4L")  # no raise
    assert sent == []  # nothing sent without the key
    (warning,) = warnings
    assert warning["m"] == "could not switch on at the resolver"
    assert warning["reason"].startswith("SSM parameter /ibi/archive/registration-key: ")
    assert reason in warning["reason"]
