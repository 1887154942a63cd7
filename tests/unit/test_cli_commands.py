"""The `ibi` command against in-memory APIs (no socket): each command's route, `--json` meaning
the same everywhere, deposits streamed with progress on a terminal only, help on every option,
and errors a person can read."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from ibi import client as ibi_client
from ibi.client import Raw
from ibi.core.labels import parse_label
from ibi_tools import cli

ROOT = Path(__file__).resolve().parents[2]
ITEM = "LK47B6WTPA/4GRPQLK"
FORMS = {"rep": "localhost/mint.8800/2026/11.25.13.38.23", "ibip": ITEM}
SERVICE = "LK47B6WTPA/4GRPQLJWK"


def item(**more: Any) -> dict[str, Any]:
    return {
        "ibi": FORMS,
        "state": "Original",
        "timestamp": "2026-11-25T13:38:23Z",
        "language": "en",
        "listable": True,
        "transferable": True,
        "files": [{"path": "report.txt", "sha256": "ab" * 32, "size": 12}],
        "default_file": "report.txt",
        "next_edition": None,
        "translations": [],
        "metadata": None,
        "metadata_oai_dc": None,
        "dc": {"title": ["A report"]},
        "pending": False,
        "urls": {"item": "http://a.example/col/x/report.txt", "metadata": None},
        **more,
    }


class Federation:
    """An Archive's deposit API, a resolver's administration and a bucket, in memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.puts: list[Any] = []

    def send(self, method: str, url: str, *, data: Any = b"", **_: Any) -> Raw:
        split = urlsplit(url)
        if split.hostname == "s3.example":
            self.puts.append(data)
            while data.read(65536):
                pass
            return Raw(200, {}, b"")
        body = json.loads(data) if data else None
        self.calls.append((method, split.path, parse_qs(split.query), body))
        return self.answer(method, split.path, body)

    def answer(self, method: str, path: str, body: Any) -> Raw:
        routes: dict[tuple[str, str], Any] = {
            ("GET", "/api/service"): {
                "archiveserviceibi": {"ibip": SERVICE},
                "archiveaddress": "127.0.0.1:8810",
                "base_url": "http://127.0.0.1:8810",
            },
            ("GET", "/api/item"): {**item(), "accesses": 3},
            ("PATCH", "/api/item"): item(**(body or {})),
            ("DELETE", "/api/item"): item(state="Deleted", files=[]),
            ("POST", "/api/item/links"): item(next_edition={"ibip": "LK47B6WTPA/4GRPQLKWH"}),
            ("POST", "/api/items"): item(files=[]),
            ("POST", "/api/item/files"): item(),
            ("POST", "/api/item/files/replace"): item(),
            ("POST", "/api/transfers/accept"): item(),
            ("POST", "/api/item/transfer"): {
                "here": item(state="Copy"),
                "there": item(urls={"item": "http://b.example/col/x/report.txt"}),
            },
            ("POST", "/api/verify"): {
                "items": [{"ibi": FORMS, "files": 1, "problems": []}],
                "problems": 0,
                "next": None,
            },
            ("POST", "/admin/archives"): {
                "archiveserviceibi": {"ibip": SERVICE},
                "included": False,
            },
            ("GET", "/admin/archives"): {
                "archives": [
                    {
                        "archiveserviceibi": {"ibip": SERVICE},
                        "included": True,
                        "address": "127.0.0.1:8810",
                        "confirmed": True,
                        "last_answer_at": None,
                        "last_outcome": None,
                    }
                ]
            },
        }
        if (method, path) == ("POST", "/api/item/uploads"):
            uploads = [
                {"path": f["path"], "method": "PUT", "url": "http://s3.example/u", "headers": {}}
                for f in body["files"]
            ]
            return self.json({"uploads": uploads})
        if (method, path) not in routes:
            return self.json({"error": {"code": "NotFound", "message": f"no route {path}"}}, 404)
        return self.json(routes[method, path])

    @staticmethod
    def json(body: Any, status: int = 200) -> Raw:
        return Raw(status, {"Content-Type": "application/json"}, json.dumps(body).encode())

    def routes(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path, _, _ in self.calls]


REAL = {name: getattr(ibi_client, name) for name in ("ArchiveClient", "ResolverClient")}


@pytest.fixture
def federation(monkeypatch: pytest.MonkeyPatch) -> Federation:
    made = Federation()
    for name, real in REAL.items():

        def build(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            return _real(*args, **{**kwargs, "transport": made.send})

        monkeypatch.setattr(ibi_client, name, build)
    return made


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


A = ("--endpoint", "http://a.example/")  # a trailing slash: never a doubled one in a URL
R = ("--endpoint", "http://r.example/")


# ---------------------------------------------------------------------------- new commands


def test_update_changes_an_item_through_patch(
    federation: Federation, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(
        capsys, "archive", "update", ITEM, "--no-listable", "--language", "pt-BR", *A
    )
    assert (status, err) == (0, "")
    method, path, query, body = federation.calls[-1]
    assert (method, path, query["ibi"]) == ("PATCH", "/api/item", [ITEM])
    assert body == {"listable": False, "language": "pt-BR"}
    assert "listable no" in out and "pt-BR" in out


def test_update_with_nothing_to_change_is_a_usage_error(
    federation: Federation, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "archive", "update", ITEM, *A)
    assert status == 2 and out == "" and "--listable" in err and federation.calls == []


def test_link_sends_one_link_a_request_in_order(
    federation: Federation, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(
        capsys, "archive", "link", ITEM, "--next-edition", "LK47B6WTPA/4GRPQLKWH",
        "--translation", "pt-BR", "LK47B6WTPA/4GRPQLKWJ",
        "--translation", "fr", "https://example.org/fr",
        "--oai-dc", "LK47B6WTPA/4GRPQLKWK", *A,
    )  # fmt: skip
    assert status == 0
    assert [body for _, path, _, body in federation.calls if path == "/api/item/links"] == [
        {"next_edition": "LK47B6WTPA/4GRPQLKWH"},
        {"translation": {"language": "pt-BR", "ibi": "LK47B6WTPA/4GRPQLKWJ"}},
        {"translation": {"language": "fr", "url": "https://example.org/fr"}},
        {"metadata": {"ibi": "LK47B6WTPA/4GRPQLKWK", "format": "oai_dc"}},
    ]
    assert "next edition  LK47B6WTPA/4GRPQLKWH" in out


def test_delete_leaves_a_tombstone(
    federation: Federation, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "archive", "delete", ITEM, *A)
    assert status == 0 and federation.routes() == [("DELETE", "/api/item")]
    assert re.search(r"^state\s+Deleted$", out, re.MULTILINE)


# ---------------------------------------------------------------------------- --json


JSON_COMMANDS = [
    ("archive", "service", *A),
    ("archive", "item", ITEM, *A),
    ("archive", "update", ITEM, "--listable", *A),
    ("archive", "link", ITEM, "--next-edition", "LK47B6WTPA/4GRPQLKWH", *A),
    ("archive", "delete", ITEM, *A),
    ("archive", "verify", *A),
    ("archive", "verify", ITEM, *A),
    ("archive", "transfer", ITEM, "--to", "http://b.example/", *A),
    ("archive", "accept", "ibioffer1.x", *A),
    ("resolver", "archives", *R),
]


@pytest.mark.parametrize("argv", JSON_COMMANDS, ids=[" ".join(a[:2]) for a in JSON_COMMANDS])
def test_json_only_with_json_and_text_without(
    federation: Federation, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    status, out, err = run(capsys, *argv, "--json")
    assert (status, err) == (0, "")
    assert all(isinstance(json.loads(line), dict) for line in out.splitlines()) and out
    status, out, err = run(capsys, *argv)
    assert (status, err) == (0, "") and out
    for line in out.splitlines():
        with pytest.raises(ValueError):
            json.loads(line)
    assert "None" not in out


def test_resolver_register_prints_text_or_json(
    federation: Federation, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    key = tmp_path / "key"
    key.write_text("1234567890-1234567890\n")
    argv = ("resolver", "register", "--archive", SERVICE, "--key-file", str(key), *R)
    assert run(capsys, *argv)[1] == f"registered {SERVICE}: not included yet (`ibi archive on`)\n"
    assert json.loads(run(capsys, *argv, "--json")[1])["included"] is False


def test_replace_prints_the_item_as_text_or_json(
    federation: Federation, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new = tmp_path / "report.txt"
    new.write_text("the report, v2")
    argv = ("archive", "replace", ITEM, str(new), "--reason", "typo", *A)
    assert run(capsys, *argv)[1].startswith("ibi ")
    assert json.loads(run(capsys, *argv, "--json")[1])["ibi"] == FORMS


def test_archive_switch_prints_the_answer_or_its_pairs(
    federation: Federation,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    urls: list[str] = []

    def resolver(method: str, url: str, **_: Any) -> Raw:
        urls.append(url)
        return Raw(200, {}, b"status.archive included\r\nstatus.confirmation successful\r\n")

    monkeypatch.setattr(ibi_client.resolver, "http_send", resolver)
    key = tmp_path / "key"
    key.write_text("1234567890-1234567890\n")
    argv = ("archive", "on", "--resolver", "http://r.example/", "--key-file", str(key), *A)
    status, out, _ = run(capsys, *argv)
    assert status == 0 and out == "status.archive included\nstatus.confirmation successful\n"
    status, out, _ = run(capsys, *argv, "--json")
    assert json.loads(out) == {"status.archive": "included", "status.confirmation": "successful"}
    assert all("//" not in url.partition("://")[2] for url in urls)


def test_the_urls_built_from_an_endpoint_with_a_trailing_slash(
    federation: Federation, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "archive", "transfer", ITEM, "--to", "http://b.example/", *A)
    (call,) = federation.calls
    assert call[1] == "/api/item/transfer" and call[3]["to"] == "http://b.example"


# ---------------------------------------------------------------------------- deposit


def _deposit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, *more: str
) -> tuple[int, str, str]:
    (tmp_path / "a.txt").write_bytes(b"a" * 300_000)
    (tmp_path / "b.txt").write_bytes(b"b" * 100)
    return run(capsys, "deposit", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), *A, *more)


def test_deposit_streams_files_to_the_client(
    federation: Federation, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = _deposit(capsys, tmp_path)
    assert status == 0 and len(federation.puts) == 2
    for sent in federation.puts:
        assert not isinstance(sent, bytes | bytearray) and callable(sent.read)
    # Not a terminal (captured): no progress, only the IBI and its URL.
    assert err == "" and out.splitlines() == [
        f"{FORMS['rep']} {ITEM}",
        "http://a.example/col/x/report.txt",
    ]


def _terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_deposit_shows_bytes_and_files_on_a_terminal(
    federation: Federation,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _terminal(monkeypatch)
    status, out, err = _deposit(capsys, tmp_path)
    assert status == 0 and out.splitlines()[0] == f"{FORMS['rep']} {ITEM}"
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    assert "file 2/2 b.txt" in plain and "300.1/300.1 kB" in plain


def test_deposit_json_shows_no_progress_even_on_a_terminal(
    federation: Federation,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _terminal(monkeypatch)
    status, out, err = _deposit(capsys, tmp_path, "--json")
    assert status == 0 and err == "" and json.loads(out)["ibi"] == FORMS


# ---------------------------------------------------------------------------- help


def _leaves(parser: argparse.ArgumentParser, name: str = "ibi") -> list[tuple[str, Any]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                found += _leaves(child, f"{name} {sub}")
    return found or [(name, parser)]


LEAVES = _leaves(cli.build_parser())


@pytest.mark.parametrize(("name", "parser"), LEAVES, ids=[name for name, _ in LEAVES])
def test_every_option_and_argument_has_a_help_line(name: str, parser: Any) -> None:
    for action in parser._actions:
        assert action.help and action.help != argparse.SUPPRESS, (name, action.option_strings)


SUBSYSTEM_USED = {"ibi mint", "ibi mints", "ibi deposit"}


@pytest.mark.parametrize(("name", "parser"), LEAVES, ids=[name for name, _ in LEAVES])
def test_subsystem_is_offered_only_where_it_is_used(name: str, parser: Any) -> None:
    options = {option for action in parser._actions for option in action.option_strings}
    assert ("--subsystem" in options) == (name in SUBSYSTEM_USED)


def test_every_command_is_documented_in_docs_cli() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    for name, _ in LEAVES:  # "ibi archive off" is in "ibi archive on|off …"
        *command, last = name.split()
        assert re.search(rf"{' '.join(command)} [\w|]*\b{last}\b", text), name


def test_help_shows_no_literal_double_backticks() -> None:
    for name, parser in [("ibi", cli.build_parser()), *LEAVES]:
        assert "``" not in parser.format_help(), name


# ---------------------------------------------------------------------------- errors


def test_inspect_names_the_label_once(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "inspect", "foo")
    assert status == 2 and err.count("'foo'") == 1 and "ibi: ibi:" not in err
    assert err.startswith("ibi: invalid IBI: 'foo' is neither")
    status, _, err = run(capsys, "holdings", "foo", "--resolver", "http://r.example")
    assert status == 2 and err.count("'foo'") == 1


def test_a_deterministic_refusal_is_one_request(
    federation: Federation, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(method: str, path: str, body: Any) -> Raw:
        message = "the receiving Archive did not answer; nothing moved"
        return Federation.json({"error": {"code": "TransferRefused", "message": message}}, 502)

    monkeypatch.setattr(federation, "answer", refused)
    status, out, err = run(capsys, "archive", "transfer", ITEM, "--to", "http://b.example", *A)
    assert status == 1 and out == "" and len(federation.calls) == 1
    assert err == "ibi: 502 TransferRefused: the receiving Archive did not answer; nothing moved\n"


# ---------------------------------------------------------------------------- README


def test_readme_example_comments_match_what_the_labels_are() -> None:
    readme = (ROOT / "README.md").read_text()
    examples = re.findall(r"^ibi inspect (\S+).*?#(.*)$", readme, re.MULTILINE)
    assert examples
    for label, comment in examples:
        parse_label(label)  # valid: the comment must not call it invalid
        assert not comment.strip().startswith("invalid"), comment
