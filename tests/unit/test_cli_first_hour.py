"""What a new user meets in the `ibi` CLI's first hour (issue 23): a persistent URL wherever an
IBI is asked for, usage errors that say so, `archive unlink`, warnings for links that lead
nowhere, help that names the variables, and docs/cli.md synopses that match the parser."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ibi import client as ibi_client
from ibi.client import Raw
from ibi.core.persistent_url import PersistentURL, parse_ibi_or_persistent_url
from ibi_tools import cli
from tests.unit import test_holdings as holdings
from tests.unit.test_cli_commands import FORMS, ITEM, LEAVES, REAL, ROOT, Federation, item
from tests.unit.test_persistent_url import persistent_urls

A = ("--endpoint", "http://a.example")
RESOLVER = "http://127.0.0.1:8080"
NEXT = "LK47B6WTPA/4GRPQLKWH"


class Services(Federation):
    """The in-memory Archive of test_cli_commands, with link removal and a resolver's holdings
    view: ``held`` maps an IBI to the states the Archives report (none: ``none`` from one)."""

    def __init__(self, held: dict[str, list[str]] | None = None) -> None:
        super().__init__()
        self.held = held or {}

    def answer(self, method: str, path: str, body: Any) -> Raw:
        if method == "GET" and path.startswith("/holdings/"):
            ibi = unquote(path.removeprefix("/holdings/"))
            states = self.held.get(ibi, ["none"])
            return self.json(
                {
                    "ibi": ibi,
                    "archives": [{"archive": f"a{n}", "state": s} for n, s in enumerate(states)],
                    "verdict": {"ok": True, "problems": [], "copies": [], "edition_chain": []},
                }
            )
        if (method, path) == ("DELETE", "/api/item/links"):
            return self.json(item())
        return super().answer(method, path, body)


@pytest.fixture
def services(monkeypatch: pytest.MonkeyPatch) -> Services:
    made = Services()
    for name, real in REAL.items():

        def build(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            return _real(*args, **{**kwargs, "transport": made.send})

        monkeypatch.setattr(ibi_client, name, build)
    monkeypatch.delenv("IBI_RESOLVER_URL", raising=False)
    return made


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# ---------------------------------------------------------------------------- persistent URLs


PASTED = [
    f"{RESOLVER}/{ITEM}",
    f"{RESOLVER}/{ITEM}/",
    f"{RESOLVER}/{ITEM.lower()}/report.txt?ibiurl.requireditemstatus=Original#top",
    f"https://resolver.example/{FORMS['rep']}/sub/a%20b.txt",
    f"{RESOLVER}/{ITEM}/a b.txt",  # as a browser shows it
]


@pytest.mark.parametrize("url", PASTED)
def test_inspect_decodes_the_ibi_of_a_pasted_persistent_url(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    status, out, err = run(capsys, "inspect", url, "--json")
    assert (status, err) == (0, "")
    label = FORMS["rep"] if "resolver.example" in url else ITEM
    assert json.loads(out) == json.loads(run(capsys, "inspect", label, "--json")[1])


@given(persistent_urls(), st.sampled_from(["http://127.0.0.1:8080", "https://r.example"]))
def test_a_pasted_persistent_url_reads_back_as_the_resolver_reads_it(
    url: PersistentURL, resolver: str
) -> None:
    """Whatever the persistent URL, pasted whole it gives what the resolver parses from it."""
    assert parse_ibi_or_persistent_url(resolver + url.path_and_query()) == url
    assert parse_ibi_or_persistent_url(f" {url.ibi.label}/ ") == PersistentURL(ibi=url.ibi)


def test_inspect_decodes_the_ibi_even_behind_a_modifier(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run(capsys, "inspect", f"{RESOLVER}/{ITEM}!:(oai_dc)/x.xml", "--json")
    assert status == 0 and json.loads(out)["label"] == ITEM


def test_holdings_takes_a_persistent_url(
    services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    services.held[ITEM] = ["Original"]
    status, out, err = run(
        capsys, "holdings", f"{RESOLVER}/{ITEM}/report.txt", "--resolver", RESOLVER
    )
    assert (status, err) == (0, "") and out.startswith(f"Holdings of {ITEM}")
    assert services.routes() == [("GET", f"/holdings/{ITEM}")]


# Every argument that is an IBI, given as a persistent URL: the command sends the IBI.
URL = f"{RESOLVER}/{ITEM.lower()}/report.txt"
IBI_ARGUMENTS = [
    (("archive", "item", URL, *A), "ibi"),
    (("archive", "update", URL, "--listable", *A), "ibi"),
    (("archive", "delete", URL, *A), "ibi"),
    (("archive", "verify", URL, *A), "ibi"),
    (("archive", "link", ITEM, "--next-edition", URL, *A), "next_edition"),
    (("archive", "link", ITEM, "--metadata", URL, *A), "metadata"),
    (("archive", "link", ITEM, "--oai-dc", URL, *A), "oai_dc"),
    (("archive", "unlink", URL, "--next-edition", *A), "ibi"),
    (("archive", "transfer", URL, "--to", "http://b.example", *A), "ibi"),
    (("archive", "offer", URL, "--to", URL, *A), "to"),
    (("archive", "replace", URL, "x.txt", "--reason", "r", *A), "ibi"),
    (("archive", "on", "--resolver", RESOLVER, "--resolver-service-ibi", URL, *A), "resolver_service_ibi"),
    (("resolver", "register", "--archive", URL, *A), "archive"),
    (("deposit", "x.txt", "--copy-of", URL, *A), "copy_of"),
    (("holdings", URL), "ibi"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "dest"), IBI_ARGUMENTS, ids=[f"{argv[1]} {dest}" for argv, dest in IBI_ARGUMENTS]
)
def test_every_ibi_argument_takes_a_persistent_url(argv: tuple[str, ...], dest: str) -> None:
    assert getattr(cli.build_parser().parse_args(argv), dest) == ITEM


def test_every_ibi_argument_is_read_by_the_one_parser() -> None:
    """A new IBI argument cannot forget persistent URLs: an IBI metavar means ``ibi_argument``
    (``inspect``'s LABEL is read in cmd_inspect by the same read_ibi, modifiers allowed)."""
    arguments = {
        (name, action.dest): action.type
        for name, parser in LEAVES
        for action in parser._actions
        if action.metavar in {"IBI", "SERVICE_IBI"} and name != "ibi inspect"
    }
    assert len(arguments) >= len(IBI_ARGUMENTS)
    assert {where for where, kind in arguments.items() if kind is not cli.ibi_argument} == set()


def test_a_modifier_naming_another_item_is_refused_with_what_to_give(
    services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "archive", "item", f"{RESOLVER}/{ITEM}!", *A)
    assert status == 2 and out == "" and services.calls == []
    assert err == (
        f"ibi: '{RESOLVER}/{ITEM}!' names a related item of {ITEM} (the modifier '!'), "
        f"not one IBI: give {ITEM} itself\n"
    )


@pytest.mark.parametrize(
    "url",
    [f"{RESOLVER}/", f"{RESOLVER}/not-an-ibi", f"{RESOLVER}/{ITEM}?ibiurl.verblist=Nonsense"],
)
def test_a_persistent_url_holding_no_valid_ibi_is_one_line_exit_2(
    services: Services, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    status, out, err = run(capsys, "archive", "item", url, *A)
    assert status == 2 and out == "" and services.calls == []
    assert len(err.splitlines()) == 1 and err.startswith("ibi: invalid ")


# ---------------------------------------------------------------------------- usage errors


def test_label_with_a_date_and_no_form_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "label", "--date", "1287588115")
    assert (status, out) == (2, "") and "--host" in err and "--ip" in err
    assert run(capsys, "label", "--date", "1287588115", "--json")[:2] == (2, "")


@pytest.mark.parametrize(
    "argv",
    [
        ("holdings", ITEM, "--resolver", "127.0.0.1:8080"),
        ("deposit", "x.txt", "--resolver", "127.0.0.1:8080", *A),
        ("deposit", "x.txt", "--resolver", "localhost:8080", *A),
        ("archive", "link", ITEM, "--next-edition", NEXT, "--resolver", "127.0.0.1:8080", *A),
        ("archive", "on", "--resolver", "127.0.0.1:8080", "--key-file", "k", *A),
    ],
)
def test_a_resolver_url_without_a_scheme_is_refused(
    services: Services,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.txt").write_text("x")
    (tmp_path / "k").write_text("1234567890-1234567890")
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == "" and services.calls == []
    assert "is not an http(s) URL of a resolver (e.g. http://" in err


def test_a_resolver_variable_without_a_scheme_is_refused_and_named(
    services: Services, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IBI_RESOLVER_URL", "127.0.0.1:8080")
    status, _, err = run(capsys, "holdings", ITEM)
    assert status == 2 and err.startswith("ibi: IBI_RESOLVER_URL '127.0.0.1:8080' is not")


def test_a_deposit_prints_a_persistent_url_with_its_scheme(
    services: Services, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a")
    status, out, _ = run(
        capsys, "deposit", str(tmp_path / "a.txt"), "--resolver", f"{RESOLVER}/", *A
    )
    assert status == 0 and out.splitlines()[1] == f"{RESOLVER}/{ITEM}"


def test_a_deposit_of_files_and_a_url_is_refused(
    services: Services, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a")
    argv = ("deposit", str(tmp_path / "a.txt"), "--url", "https://example.org/a.pdf", *A)
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == "" and services.calls == []
    assert err.startswith("ibi: give FILEs or --url, not both")


def test_a_copy_of_other_bytes_names_the_users_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "x1mod.csv"  # the original's single file is data.csv
    mine.write_bytes(b"other bytes\n")
    federation = holdings.Federation(holdings.original_holding())
    status, _, err = holdings.deposit(
        federation, monkeypatch, capsys, str(mine), "--copy-of", holdings.ITEM,
        "--resolver", "http://r.example",
    )  # fmt: skip
    expected = hashlib.sha256(b"a,b\n").hexdigest()
    assert status == 1 and err.startswith(
        f"ibi: {mine}: not the original's bytes (the original's data.csv in "
        f"{holdings.A} has SHA-256 {expected}, 4 bytes)"
    )


# ---------------------------------------------------------------------------- links


def test_linking_an_ibi_nobody_holds_warns_and_says_how_to_undo(
    services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("archive", "link", ITEM, "--next-edition", NEXT, "--resolver", RESOLVER, *A)
    status, out, err = run(capsys, *argv)
    assert status == 0 and "next edition" in out  # linked all the same
    assert err == (
        f"ibi: warning: {NEXT}, the next edition, is held by no Archive at {RESOLVER}: the "
        f"link leads readers to an error until one holds it (`ibi archive unlink {ITEM} "
        "--next-edition` removes it)\n"
    )
    assert services.routes() == [("GET", f"/holdings/{NEXT}"), ("POST", "/api/item/links")]


def test_linking_held_ibis_is_quiet_and_a_deleted_one_is_named(
    services: Services, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IBI_RESOLVER_URL", RESOLVER)
    services.held = {NEXT: ["Copy", "unreachable"], "LK47B6WTPA/4GRPQLKWJ": ["Deleted"]}
    status, _, err = run(capsys, "archive", "link", ITEM, "--next-edition", NEXT, *A)
    assert (status, err) == (0, "")
    argv = ("archive", "link", ITEM, "--translation", "pt", "LK47B6WTPA/4GRPQLKWJ", *A)
    status, _, err = run(capsys, *argv)
    assert status == 0 and "LK47B6WTPA/4GRPQLKWJ, the translation into pt, was deleted" in err
    assert "`ibi archive unlink LK47B6WTPA/4GRPQLK --translation pt`" in err


def test_unlink_removes_each_link_named_one_request_a_link(
    services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("archive", "unlink", ITEM, "--next-edition", "--translation", "pt-BR", "--oai-dc", *A)
    status, out, err = run(capsys, *argv)
    assert (status, err) == (0, "") and out.startswith("ibi ")
    assert [(method, path, query) for method, path, query, _ in services.calls] == [
        ("DELETE", "/api/item/links", {"ibi": [ITEM], "link": ["next_edition"]}),
        ("DELETE", "/api/item/links", {"ibi": [ITEM], "link": ["translation(pt-BR)"]}),
        ("DELETE", "/api/item/links", {"ibi": [ITEM], "link": ["metadata_oai_dc"]}),
    ]  # fmt: skip


def test_unlink_with_nothing_named_is_a_usage_error(
    services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "archive", "unlink", ITEM, *A)
    assert status == 2 and "--next-edition" in err and services.calls == []


# ---------------------------------------------------------------------------- help and docs


def test_an_unknown_option_says_what_it_likely_means_and_whose_help_to_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["deposit", "a.txt", "--idempotency-keys", "k", *A])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err == (
        "ibi: unrecognized arguments: --idempotency-keys k (did you mean --idempotency-key?) "
        "(see `ibi deposit --help`)\n"
    )
    with pytest.raises(SystemExit):
        cli.main(["archive", "unlink", ITEM, "--bogus", *A])
    assert capsys.readouterr().err.endswith("(see `ibi archive unlink --help`)\n")


@pytest.mark.parametrize(
    ("command", "variables"),
    [
        (["deposit"], ["IBI_ARCHIVE_ENDPOINT", "IBI_RESOLVER_URL"]),
        (["archive", "item"], ["IBI_ARCHIVE_ENDPOINT"]),
        (["mint"], ["IBI_MINT_ENDPOINT"]),
        (["resolver", "archives"], ["IBI_RESOLVER_URL"]),
    ],
)
def test_help_names_the_endpoint_and_its_variable(
    capsys: pytest.CaptureFixture[str], command: list[str], variables: list[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the API's base URL" not in text
    assert all(f"${variable}" in text for variable in variables)


# Options every API command takes, said once in docs/cli.md rather than in each synopsis.
API_OPTIONS = {"--sign", "--no-sign", "--region", "--timeout"}


def synopses() -> dict[str, set[str]]:
    """docs/cli.md's synopsis lines (``ibi …`` in code blocks): command -> options named."""
    text = (ROOT / "docs" / "cli.md").read_text()
    found: dict[str, set[str]] = {}
    for block in re.findall(r"^```\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            words = line.split()
            if not words or words[0] != "ibi":
                continue
            names: list[str] = []
            for word in words[1:]:
                if not re.fullmatch(r"[a-z]+(-[a-z]+)*(\|[a-z]+(-[a-z]+)*)*", word):
                    break
                names.append(word)
            options = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line))
            *parents, last = names
            for name in last.split("|"):
                found.setdefault(" ".join(["ibi", *parents, name]), set()).update(options)
    return found


@pytest.mark.parametrize(("name", "parser"), LEAVES, ids=[name for name, _ in LEAVES])
def test_each_synopsis_in_docs_cli_names_exactly_its_commands_options(
    name: str, parser: Any
) -> None:
    options = {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"}
    if "--endpoint" in options:
        assert options >= API_OPTIONS, name
        options -= API_OPTIONS
    assert synopses().get(name) == options, name
