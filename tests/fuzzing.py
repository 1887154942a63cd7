"""Fuzzing the real Lambda handlers in-process: events as API Gateway sends them, and the rules
every answer keeps whatever the request (issue 11, finding 8).

The events come from :func:`ibi_tools.local.gateway.build_event`, the HTTP API payload 2.0 that
``ibi local`` builds from a real request; :func:`check_answer` is what an answer must be: never a
500, headers that can be sent, a body that can be encoded, a content type that says what it is,
and, from a JSON API, a JSON body with an error code on every 4xx.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ibi_tools.local.gateway import LocalContext, build_event

# Deterministic and bounded: the same examples on every run, a few seconds per test.
FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# For a test that covers many routes at once.
FUZZ_MORE = settings(FUZZ, max_examples=300)

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

# Characters that broke pages and records, and those that break HTML, headers and URLs.
NASTY = "\x00\x07\x08\x0b\x1b\x1f\x7f\x85\x9f\ud800\udbff\udc00\udfff\ufffe\uffff\u2028\ufeff"
SPECIAL = NASTY + "\t\n\r <>&\"'%/?#;:=+.,\\!()[]{}é漢😀"
texts = st.one_of(
    st.text(max_size=20),
    st.text(st.sampled_from(SPECIAL + "aZ09-_"), max_size=20),
    st.text(st.characters(codec=None, categories=["Cc", "Cs", "Co", "Zs", "L", "N", "P", "S"])),
)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=5 * 1024**3 - 2, max_value=5 * 1024**3 + 2),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1, 1.5, 10**30, 2**63]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=10,
)


def objects(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects with some of a route's own fields (any values of theirs), and strays."""
    known = st.fixed_dictionaries(
        {}, optional={name: s | json_values for name, s in fields.items()}
    )
    stray = st.dictionaries(texts, json_values, max_size=2)
    return st.one_of(known, st.builds(lambda a, b: {**b, **a}, known, stray))


def mutations(
    valid: dict[str, Any], fields: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[dict[str, Any]]:
    """``valid`` with one or two fields changed (to any value of theirs) or left out, or any
    object of the route's fields: requests that get far into the route before they go wrong."""

    def changed(name: str) -> st.SearchStrategy[dict[str, Any]]:
        return (fields[name] | json_values).map(lambda value: {**valid, name: value})

    one = st.sampled_from(sorted(fields)).flatmap(changed)
    dropped = st.sampled_from(sorted(valid)).map(
        lambda name: {k: v for k, v in valid.items() if k != name}
    )
    two = st.tuples(one, st.sampled_from(sorted(fields))).flatmap(
        lambda pair: (fields[pair[1]] | json_values).map(lambda v: {**pair[0], pair[1]: v})
    )
    return st.one_of(one, one, two, dropped, objects(fields))


# Bodies no route can take: what the parser itself chokes on, and plain garbage.
HOSTILE_BODIES = [
    b"null",
    b"[]",
    b'"text"',
    b"12",
    b"{",
    b'{"count": ' + b"9" * 5000 + b"}",
    b'{"count": 1' + b"0" * 50 + b"}",
    b'{"count": 1e999}',
    b'{"count": NaN}',
    b'{"count": -Infinity}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 40 + b"1" + b"}" * 40,
    b"\xff\xfe\x00garbage",
    b'{"dc": {"title": "\\ud800"}}',
    b'{"files": [{"path": "a", "sha256": "' + b"0" * 64 + b'", "size": true}]}',
]


def bodies(objects_of_route: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """A request body: mostly JSON built for the route, sometimes anything at all."""
    return st.one_of(
        objects_of_route.map(lambda value: json.dumps(value).encode()),
        json_values.map(lambda value: json.dumps(value).encode()),
        st.sampled_from(HOSTILE_BODIES),
        st.binary(max_size=64),
        st.just(b""),
    )


def path_segments(known: list[str]) -> st.SearchStrategy[str]:
    """What follows a route's prefix: known labels (with more after them), or anything."""
    tails = st.one_of(
        st.just(""),
        texts.map(lambda t: "/" + t),
        texts.map(lambda t: "/" + quote(t, safe="/", errors="surrogatepass")),
    )
    return st.one_of(
        st.builds(lambda label, tail: label + tail, st.sampled_from(known), tails),
        texts,
        texts.map(lambda t: quote(t, safe="/", errors="surrogatepass")),
    )


def query_strings(names: list[str], known: list[str]) -> st.SearchStrategy[str]:
    """``a=b&c=d`` with the route's own parameter names (and others), values of any kind."""
    value = st.one_of(st.sampled_from(known), texts, numbers.map(str))
    pair = st.tuples(st.sampled_from(names) | texts, value)
    encoded = st.lists(pair, max_size=5).map(
        lambda pairs: "&".join(
            f"{quote(k, errors='surrogatepass')}={quote(v, errors='surrogatepass')}"
            for k, v in pairs
        )
    )
    return st.one_of(encoded, texts.map(lambda t: quote(t, safe="=&", errors="surrogatepass")))


def event(
    method: str,
    path: str,
    query: str = "",
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The event API Gateway (HTTP API, payload 2.0) sends for this request."""
    built = build_event(
        method=method,
        target="/",
        headers=list((headers or {}).items()),
        body=body,
        source_ip="198.51.100.7",
        host="api.example.org",
    )
    built["rawPath"] = built["requestContext"]["http"]["path"] = path
    built["rawQueryString"] = query
    if query:
        parameters: dict[str, str] = {}
        for part in query.split("&"):
            name, _, value = part.partition("=")
            parameters[name] = f"{parameters[name]},{value}" if name in parameters else value
        built["queryStringParameters"] = parameters
    return built


SANE_TYPES = ("application/json", "text/html", "text/plain", "text/xml")


def check_answer(
    handler: Handler,
    request: dict[str, Any],
    *,
    json_api: bool,
    file_types: tuple[str, ...] = (),
    server_errors: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """Invoke ``handler`` with ``request``; fail unless the answer keeps every rule above."""
    answer = handler(request, LocalContext("fuzz", request["requestContext"]["requestId"]))
    status = answer["statusCode"]
    where = f"{request['requestContext']['http']['method']} {request['rawPath']!r}"
    assert status != 500, (where, request.get("body"), answer.get("body"))
    assert 100 <= status < 500 or status in server_errors, (where, status, answer.get("body"))
    headers = answer.get("headers") or {}
    for name, value in headers.items():
        assert str(value).isascii() and str(value).isprintable(), (where, name, value)
    raw = answer.get("body") or ""
    payload = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode("utf-8")
    content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    if payload:
        assert content_type.startswith(SANE_TYPES + file_types), (where, content_type)
    if content_type.startswith("text/xml"):
        ElementTree.fromstring(payload)  # well-formed, whatever the record holds
    if json_api and payload:
        assert content_type == "application/json", (where, content_type)
        data = json.loads(payload)
        if 400 <= status < 500:
            error = data["error"]
            assert isinstance(error["code"], str) and error["code"], (where, data)
            assert isinstance(error["message"], str) and error["message"], (where, data)
    return answer
