"""Issue 26 item 5: the canary's run (functions/canary/), with a fake transport."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from functions.canary import handler
from functions.canary.probe import MAX_HOPS, Answer, probe

RESOLVER = "https://urlib.example.org/"
IBI = "8JMKD3MGP8W/35MME4E"
FILE = "https://archive.example.org/col/8JMKD3MGP8W/35MME4E/doc/report.pdf"
EVENT = Path(__file__).resolve().parents[2] / "events" / "canary" / "scheduled.json"


@dataclass
class FakeTransport:
    """Scripted answers by URL; an exception instance is raised instead."""

    answers: Mapping[str, Answer | OSError]
    asked: list[str] = field(default_factory=list)

    def get(self, url: str, *, timeout: float) -> Answer:
        self.asked.append(url)
        answer = self.answers[url]
        if isinstance(answer, OSError):
            raise answer
        return answer


def redirect(location: str, status: int = 302) -> Answer:
    return Answer(status, {"location": location}, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


def test_a_redirect_to_a_served_file_is_resolved() -> None:
    transport = FakeTransport(
        {RESOLVER + IBI: redirect(FILE), FILE: Answer(200, {"content-type": "application/pdf"}, 5)}
    )
    outcome = probe(transport, RESOLVER, IBI, timeout=5, clock=Clock())
    assert outcome.resolved and outcome.problem is None and outcome.step == "archive"
    assert outcome.urls == (RESOLVER + IBI, FILE)
    assert outcome.milliseconds == 250.0
    assert transport.asked == [RESOLVER + IBI, FILE]


def test_the_archives_own_redirects_are_followed() -> None:
    presigned = "https://files.s3.sa-east-1.amazonaws.com/items/x/report.pdf?X-Amz-Signature=1"
    transport = FakeTransport(
        {
            RESOLVER + IBI: redirect("/col/" + IBI, 303),  # relative: against the resolver
            "https://urlib.example.org/col/" + IBI: redirect(presigned, 307),
            presigned: Answer(200, {}, 1),
        }
    )
    assert probe(transport, RESOLVER.rstrip("/"), IBI, timeout=5).resolved


@pytest.mark.parametrize(
    ("answers", "step", "problem"),
    [
        ({RESOLVER + IBI: Answer(404, {}, 20)}, "resolver", "404, not a redirect"),
        ({RESOLVER + IBI: Answer(200, {}, 20)}, "resolver", "200, not a redirect"),
        ({RESOLVER + IBI: Answer(302, {}, 0)}, "resolver", "302 without a usable Location"),
        (
            {RESOLVER + IBI: redirect("javascript:alert(1)")},
            "resolver",
            "302 without a usable Location",
        ),
        ({RESOLVER + IBI: TimeoutError("timed out")}, "resolver", "TimeoutError: timed out"),
        (
            {RESOLVER + IBI: redirect(FILE), FILE: Answer(503, {}, 10)},
            "archive",
            "503, 10 bytes",
        ),
        ({RESOLVER + IBI: redirect(FILE), FILE: Answer(200, {}, 0)}, "archive", "200, 0 bytes"),
        (
            {RESOLVER + IBI: redirect(FILE), FILE: ConnectionRefusedError("refused")},
            "archive",
            "ConnectionRefusedError: refused",
        ),
    ],
)
def test_a_failure_names_its_step_and_what_came_back(
    answers: Mapping[str, Answer | OSError], step: str, problem: str
) -> None:
    outcome = probe(FakeTransport(answers), RESOLVER, IBI, timeout=5)
    assert not outcome.resolved and outcome.step == step
    assert outcome.problem is not None and outcome.problem.endswith(problem)


def test_a_redirect_loop_ends() -> None:
    transport = FakeTransport({RESOLVER + IBI: redirect(RESOLVER + IBI)})
    outcome = probe(transport, RESOLVER, IBI, timeout=5)
    assert not outcome.resolved and outcome.problem == f"more than {MAX_HOPS} redirects"
    assert len(transport.asked) == MAX_HOPS + 1


def test_the_handler_publishes_whether_it_resolved(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IBI_CANARY_RESOLVER_URL", RESOLVER)
    monkeypatch.setenv("IBI_CANARY_IBI", IBI)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ibi")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "canary")
    fake = FakeTransport({RESOLVER + IBI: Answer(502, {}, 10)})
    monkeypatch.setattr(handler, "UrllibTransport", lambda: fake)

    class Context:
        function_name = "canary"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:sa-east-1:123456789012:function:canary"
        aws_request_id = "r-1"

    result: dict[str, Any] = handler.lambda_handler(json.loads(EVENT.read_text()), Context())
    assert result["resolved"] is False and result["step"] == "resolver"
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    (metrics,) = [record for record in emitted if "CanaryResolved" in record]
    assert metrics["CanaryResolved"] == [0.0] and metrics["service"] == "canary"
    assert metrics["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ibi"
