"""Acknowledgments through a durable queue (issue 13, item 1).

The resolver's real handler over DynamoDB and SQS (moto, in-process), three registered Archives
(an original, a copy of it, and an original of another item): the handler queues every
acknowledgment before it returns and starts no thread, so a Lambda frozen right after it
answers loses none. The drain, run as SQS would run the consumer, delivers each one to its
Archive, retries a failed delivery, and sends one that keeps failing to the dead-letter queue.
The local queue (``ibi local``) keeps the same semantics in a directory.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.resolver import drain, handler, wiring
from functions.resolver.acknowledgments import Delivery
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.network import Request
from functions.resolver.queue import LocalQueue, Message
from functions.resolver.registry import DynamoRegistry
from functions.resolver.settings import ConfigurationError, DrainSettings, ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core.pairlist import PairList, parse_pair_list
from ibi.defaults import RESOLVER_SERVICE_IBI
from ibi_tools.local.gateway import LocalContext
from tests.fakes_resolver import ScriptedTransport
from tests.fuzzing import event

A, B, C = "8JMKD3MGP8W/3FSUP4L", "LK47B6W/362SFKH", "8JMKD3MGP8W/3FSUP5A"
HOSTS = {A: "a.example.org", B: "b.example.org", C: "c.example.org"}
KEY = "1234567890-0987654321"
# A browser's (a robot's or a script's resolution is acknowledged to nobody: issue 35, COUNTER)
READER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
REPORT, OTHER = "8JMKD3MGP8W/35MMLL8", "8JMKD3MGP8W/35MME4E"
MAX_RECEIVES = 5


def answer(item: str, state: str, archive: str, urlkey: str) -> str:
    return (
        f"ibi {{ibip {item}}}\nstate {state}\ncontenttype Data\n"
        f"url https://{HOSTS[archive]}/col/{item}/doc.pdf\nurlkey {urlkey}"
    )


@dataclass
class Archives:
    """The Archives as the drain reaches them: each acknowledgment kept, failures scripted."""

    failing: dict[str, int] = field(default_factory=dict)  # deliveries still to fail
    received: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)

    def send(self, request: Request, *, timeout: float) -> PairList:
        archive = request.service_ibi
        self.attempts[archive] = self.attempts.get(archive, 0) + 1
        if self.failing.get(archive, 0) > 0:
            self.failing[archive] -= 1
            raise TimeoutError("timeout")
        self.received.setdefault(archive, []).append(dict(request.pairs))
        return parse_pair_list("notice {acknowledgment received}")


@dataclass
class Deployed:
    sqs: Any
    queue_url: str
    dead_url: str
    scripted: ScriptedTransport
    delivery: Delivery
    archives: Archives


@pytest.fixture
def deployed(tmp_path: Path) -> Iterator[Deployed]:
    """The resolver Lambda and the drain Lambda as infra/resolver.py deploys them."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        ensure_tables(dynamodb, "resolver")
        dead_url = sqs.create_queue(QueueName="acknowledgments-dead")["QueueUrl"]
        dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])
        redrive = {
            "deadLetterTargetArn": dead_arn["Attributes"]["QueueArn"],
            "maxReceiveCount": str(MAX_RECEIVES),
        }
        queue_url = sqs.create_queue(
            QueueName="acknowledgments", Attributes={"RedrivePolicy": json.dumps(redrive)}
        )["QueueUrl"]
        settings = ResolverSettings.from_environment(
            {
                "IBI_RESOLVER_TABLE": "resolver",
                "IBI_PEPPER_FILE": str(tmp_path / "pepper"),
                "IBI_ACK_QUEUE_URL": queue_url,
            }
        )
        runtime = wiring.build(settings, dynamodb=dynamodb, sqs=sqs)
        assert runtime.drainer is None  # in AWS the drain is a Lambda of its own
        scripted = ScriptedTransport()
        for name in ("vet", "send", "ask_all"):  # the only network the resolver has
            setattr(runtime.transport, name, getattr(scripted, name))
        wiring.install(runtime)
        try:
            for archive in (A, B, C):
                include(archive)
            archives = Archives()
            directory = ArchiveDirectory(DynamoRegistry(dynamodb, "resolver"))
            delivery = Delivery(archives, directory, timeout=1.0)  # the drain's own runtime
            yield Deployed(sqs, queue_url, dead_url, scripted, delivery, archives)
        finally:
            wiring.install(None)


def invoke(request: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = handler.lambda_handler(request, LocalContext("resolver", "r-1"))
    return answer


def include(archive: str) -> None:
    body = json.dumps(  # the Archives here share a prefix: none of them owns it
        {"archiveserviceibi": archive, "registrationkey": KEY, "share_prefix": True}
    ).encode()
    registered = invoke(event("POST", "/admin/archives", body=body))
    assert registered["statusCode"] == 200, registered["body"]
    query = (
        f"servicesubject=inclusionRequest&archiveaddress={HOSTS[archive]}"
        f"&archiveserviceibi={archive}&archiveip=192.0.2.20&archiveprotocol=HTTPS"
        f"&archiveplatformversion=ibi-0.1&archiveadmemailaddress=admin%40example.org"
        f"&registrationkey={KEY}"
    )
    included = invoke(event("GET", "/" + RESOLVER_SERVICE_IBI, query))
    assert included["body"].startswith("status.archive included"), included["body"]


def resolve_then_freeze(deployed: Deployed, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three resolutions; from the first request on, no thread may start (a frozen Lambda
    runs nothing after it answers: whatever a thread would do after the answer is lost)."""

    def frozen(self: threading.Thread) -> None:
        raise AssertionError(f"a thread was started: {self.name}")

    threads = set(threading.enumerate())
    monkeypatch.setattr(threading.Thread, "start", frozen)
    resolutions = [
        # the original at A, a copy at B: the 302 goes to A, so does the acknowledgment
        (REPORT, {A: answer(REPORT, "Original", A, "1-a"), B: answer(REPORT, "Copy", B, "1-b")}),
        (OTHER, {B: answer(OTHER, "Copy", B, "2-b")}),  # only B holds a copy
        (OTHER, {C: answer(OTHER, "Original", C, "3-c")}),  # the original, now at C
    ]
    for item, answers in resolutions:
        deployed.scripted.answers = dict(answers)
        response = invoke(event("GET", "/" + item, headers={"user-agent": READER}))
        assert response["statusCode"] == 302, response["body"]
    assert set(threading.enumerate()) == threads  # nothing left running after the answers
    monkeypatch.undo()


def drain_as_sqs(deployed: Deployed) -> int:
    """Invoke the drain as the event source mapping does until the queue is empty: batches of
    up to 10, only the records it reports failed stay (visible again at once here)."""
    invocations = 0
    while True:
        received = deployed.sqs.receive_message(
            QueueUrl=deployed.queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            AttributeNames=["ApproximateReceiveCount"],
        ).get("Messages", [])
        if not received:
            return invocations
        messages = [
            Message(
                m["MessageId"],
                m["ReceiptHandle"],
                m["Body"],
                int(m["Attributes"]["ApproximateReceiveCount"]),
            )
            for m in received
        ]
        response = drain.drain(drain.sqs_event(messages), deployed.delivery)
        invocations += 1
        failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
        for message in messages:
            if message.id not in failed:
                deployed.sqs.delete_message(
                    QueueUrl=deployed.queue_url, ReceiptHandle=message.receipt
                )


def urlkeys(archives: Archives, archive: str) -> list[str]:
    return [pairs["urlkey"] for pairs in archives.received.get(archive, [])]


def test_a_frozen_lambda_still_gets_every_acknowledgment_delivered(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_then_freeze(deployed, monkeypatch)
    assert not deployed.archives.attempts  # nothing was sent in the requests
    assert drain_as_sqs(deployed) == 1  # three messages, one batch
    assert urlkeys(deployed.archives, A) == ["1-a"]
    assert urlkeys(deployed.archives, B) == ["2-b"]  # not the copy A's original won over
    assert urlkeys(deployed.archives, C) == ["3-c"]
    [acknowledgment] = deployed.archives.received[C]
    assert acknowledgment["servicesubject"] == "acknowledgment"
    assert acknowledgment["ibi"] == f"ibip {OTHER}" and acknowledgment["state"] == "Original"
    assert acknowledgment["url.persistent"].endswith("/" + OTHER)
    assert acknowledgment["clientinformation.ipaddress"].startswith("198.51.100.7")


def test_a_failed_delivery_is_retried_and_one_that_keeps_failing_is_dead_lettered(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployed.archives.failing = {B: 2, C: 1000}  # B down twice; C down for good
    resolve_then_freeze(deployed, monkeypatch)
    drain_as_sqs(deployed)
    assert urlkeys(deployed.archives, A) == ["1-a"]  # once: its batch-mates' failures
    assert urlkeys(deployed.archives, B) == ["2-b"]  # do not resend it
    assert deployed.archives.attempts[B] == 3
    assert urlkeys(deployed.archives, C) == []
    assert deployed.archives.attempts[C] == MAX_RECEIVES  # then the dead-letter queue
    [dead] = deployed.sqs.receive_message(QueueUrl=deployed.dead_url)["Messages"]
    assert json.loads(dead["Body"])["archive"] == C


def test_an_unregistered_archive_is_not_told(deployed: Deployed) -> None:
    body = json.dumps(
        {"archive": "LK47B6W/362SFKJ", "ibi": REPORT, "pairs": [], "correlation_id": "c"}
    )
    deployed.delivery.deliver(body)  # dropped (logged): no retry, nobody contacted
    assert not deployed.archives.attempts


def test_a_queue_that_refuses_never_fails_the_resolution(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> None:
        raise RuntimeError("AccessDenied")

    monkeypatch.setattr(deployed.sqs, "send_message", refuse)
    deployed.scripted.answers = {A: answer(REPORT, "Original", A, "1-a")}
    assert invoke(event("GET", "/" + REPORT))["statusCode"] == 302


def test_in_aws_the_queue_is_required() -> None:
    environment = {"IBI_RESOLVER_TABLE": "t", "IBI_PEPPER_SECRET_ARN": "arn:aws:secret"}
    with pytest.raises(ConfigurationError, match="IBI_ACK_QUEUE_URL"):
        ResolverSettings.from_environment(environment)
    with pytest.raises(ConfigurationError, match="IBI_RESOLVER_TABLE"):
        DrainSettings.from_environment({})
    drained = DrainSettings.from_environment({"IBI_RESOLVER_TABLE": "t"})
    assert drained.allow_networks == ()  # public addresses only, as the resolver


def test_the_drain_lambda_builds_from_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IBI_RESOLVER_TABLE", "resolver")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(drain, "_delivery", [])
    body = json.dumps({"archive": A, "ibi": REPORT, "pairs": [], "correlation_id": "c"})
    message = Message("m-1", "r-1", body, 1)
    with mock_aws():
        ensure_tables(boto3.client("dynamodb", region_name="us-east-1"), "resolver")
        response = drain.lambda_handler(drain.sqs_event([message]), None)
    assert response == {"batchItemFailures": []}  # A is not registered there: dropped


# ---------------------------------------------------------------------------- local queue


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_local_queue_hides_retries_and_dead_letters(tmp_path: Path) -> None:
    clock = Clock()
    queue = LocalQueue(tmp_path, visibility=30, max_receives=3, clock=clock)
    queue.send('{"n": 1}')
    queue.send('{"n": 2}')
    first = queue.receive(1)
    assert [m.receives for m in first] == [1]
    [second] = queue.receive()  # the first is invisible while it is being delivered
    assert second.body != first[0].body
    assert queue.receive() == []
    queue.delete(second.receipt)
    for receives in (2, 3):  # not deleted: visible again after the visibility timeout
        clock.now += 31
        [again] = queue.receive()
        assert (again.body, again.receives) == (first[0].body, receives)
    clock.now += 31
    assert queue.receive() == []  # a fourth receive: to dead/ instead
    assert queue.dead() == [first[0].body] and queue.waiting() == 0
    assert oct((tmp_path / "messages").stat().st_mode & 0o777) == "0o700"


def test_a_stray_file_in_the_local_queue_is_left_alone(tmp_path: Path) -> None:
    queue = LocalQueue(tmp_path, clock=Clock())
    (tmp_path / "messages" / "notes.json").write_text("{}")
    queue.send("{}")
    assert [m.body for m in queue.receive()] == ["{}"]


def test_without_a_queue_url_the_runtime_drains_a_directory(tmp_path: Path) -> None:
    """Local mode: messages an earlier run left are drained as soon as the runtime is built."""
    environment = {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(tmp_path / "p")}
    environment["IBI_ACK_QUEUE_DIR"] = str(tmp_path / "acknowledgments")
    settings = ResolverSettings.from_environment(environment)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(dynamodb, "resolver")
        body = json.dumps({"archive": A, "ibi": REPORT, "pairs": [], "correlation_id": "c"})
        empty = wiring.build(settings, dynamodb=dynamodb)
        assert empty.drainer is not None and empty.drainer._thread is None  # nothing waiting
        LocalQueue(tmp_path / "acknowledgments").send(body)  # left by an earlier run
        runtime = wiring.build(settings, dynamodb=dynamodb)
        assert isinstance(runtime.queue, LocalQueue) and runtime.drainer is not None
        assert runtime.drainer._thread is not None  # A is not registered: the drain drops it
        for _ in range(200):
            if not runtime.queue.waiting():
                break
            threading.Event().wait(0.05)
        assert runtime.queue.waiting() == 0 and runtime.queue.dead() == []


def test_two_local_drainers_never_claim_one_message(tmp_path: Path) -> None:
    clock = Clock()
    one, two = (LocalQueue(tmp_path, clock=clock) for _ in range(2))
    for n in range(15):
        one.send(json.dumps({"n": n}))
    claimed = [m.body for m in one.receive()] + [m.body for m in two.receive()]
    assert sorted(claimed) == sorted(json.dumps({"n": n}) for n in range(15))


def test_the_local_drainer_runs_the_same_drain(tmp_path: Path) -> None:
    clock = Clock()
    queue = LocalQueue(tmp_path, clock=clock, visibility=10)
    archives = Archives(failing={A: 1})
    registry = {A: HOSTS[A]}
    delivery = Delivery(archives, Directory(registry), timeout=1.0)  # type: ignore[arg-type]
    drainer = drain.LocalDrainer(queue, delivery)
    started: list[bool] = []
    assert queue.on_send == drainer.start
    queue.on_send = lambda: started.append(True)  # no thread here: drained by hand below
    pairs = [["servicesubject", "acknowledgment"], ["urlkey", "k-1"]]
    queue.send(json.dumps({"archive": A, "ibi": REPORT, "pairs": pairs, "correlation_id": "c"}))
    assert started == [True]  # a send wakes the drainer
    assert drainer.drain_once() == 1 and queue.waiting() == 1  # failed: kept, hidden
    assert drainer.drain_once() == 0
    clock.now += 11
    assert drainer.drain_once() == 1 and queue.waiting() == 0
    assert urlkeys(archives, A) == ["k-1"]


@dataclass
class Directory:
    """The registered Archives the drain finds (``ArchiveDirectory.find``)."""

    addresses: dict[str, str]

    def find(self, service_ibi: str) -> Any:
        from functions.resolver.registry import RegisteredArchive

        address = self.addresses.get(service_ibi)
        if address is None:
            return None
        return RegisteredArchive(service_ibi, {}, "", included=True, address=address)
