"""Releases from CI (issue 27), piece by piece: the Archive's conditional next-edition link, the
walk to the last version and the link after it (over the real ArchiveService in memory),
the settings GitHub gives, CITATION.cff, the summary, and the failures a user can cause."""

from __future__ import annotations

import datetime
import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.archive.errors import ArchiveError, BadRequest
from functions.archive.mapping import item_to_mapping
from functions.archive.service import ArchiveService, NextEditionExists
from ibi.client import ApiError, ArchiveClient, Raw
from ibi_tools import cff, release
from ibi_tools.release import (
    Artefact,
    Outcome,
    ReleaseError,
    Settings,
    idempotency_key,
    link_next_version,
    version_of_tag,
    walk,
)
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore, MemoryMinter
from tests.schemas.cff import valid_cff

OWN = ("8JMKD3MGP8W",)
RESOLVER = "https://ibi.example.org"
TODAY = datetime.date(2026, 11, 20)


@pytest.fixture
def archive() -> ArchiveService:
    return ArchiveService(
        MemoryItemStore(),
        clock=FakeClock(Decimal(1795473000)),
        mint=MemoryMinter(),
        own_prefixes=OWN,
    )


def deposit(archive: ArchiveService, key: str | None = None) -> str:
    return archive.create_original({"dc": {"title": ["v"]}}, idempotency_key=key).key


class ServiceClient:
    """The deposit API's calls the chain makes, answered by an ArchiveService as the handler
    answers them (an ArchiveError is its status and its class name as the code)."""

    endpoint = "http://archive.test"

    def __init__(self, archive: ArchiveService) -> None:
        self.archive = archive
        self.links: list[tuple[str, dict[str, Any]]] = []

    def _answer(self, do: Any) -> dict[str, Any]:
        try:
            return item_to_mapping(do())
        except ArchiveError as error:
            raise ApiError(error.status, str(error), type(error).__name__) from None

    def item(self, label: str) -> dict[str, Any]:
        return self._answer(lambda: self.archive.get(label))

    def link(self, label: str, body: dict[str, Any]) -> dict[str, Any]:
        self.links.append((label, body))
        return self._answer(lambda: self.archive.link(label, body))


def chain(archive: ArchiveService, first: str) -> list[str]:
    labels, item = [first], archive.get(first)
    while item.next_edition is not None:
        labels.append(item.next_edition.key)
        item = archive.get(item.next_edition.key)
    return labels


# ---------------------------------------------------------------------------- the Archive's link


def test_a_conditional_next_edition_link_is_set_when_the_item_has_none(
    archive: ArchiveService,
) -> None:
    first, second = deposit(archive), deposit(archive)
    linked = archive.link(first, {"next_edition": second, "if_none": True})
    assert linked.next_edition is not None and linked.next_edition.key == second


def test_a_conditional_link_to_an_item_that_has_another_next_edition_is_refused_with_409(
    archive: ArchiveService,
) -> None:
    first, second, third = deposit(archive), deposit(archive), deposit(archive)
    archive.link(first, {"next_edition": second, "if_none": True})
    with pytest.raises(NextEditionExists) as refused:
        archive.link(first, {"next_edition": third, "if_none": True})
    assert refused.value.status == 409
    assert f"has a next edition already, {second}" in str(refused.value)
    assert chain(archive, first) == [first, second]


def test_the_same_conditional_link_again_changes_nothing(archive: ArchiveService) -> None:
    first, second = deposit(archive), deposit(archive)
    linked = archive.link(first, {"next_edition": second, "if_none": True})
    again = archive.link(first, {"next_edition": second, "if_none": True})
    assert again.version == linked.version


def test_a_link_without_if_none_still_replaces_the_next_edition(archive: ArchiveService) -> None:
    first, second, third = deposit(archive), deposit(archive), deposit(archive)
    archive.link(first, {"next_edition": second})
    assert chain(archive, first) == [first, second]
    archive.link(first, {"next_edition": third, "if_none": False})
    assert chain(archive, first) == [first, third]


@pytest.mark.parametrize(
    "body",
    [
        {"translation": {"language": "pt", "url": "https://x.example/pt"}, "if_none": True},
        {"next_edition": "8JMKD3MGP8W/3FSUP4L", "if_none": "yes"},
        {"if_none": True},
    ],
)
def test_if_none_is_a_boolean_that_goes_with_a_next_edition_only(
    archive: ArchiveService, body: dict[str, Any]
) -> None:
    first = deposit(archive)
    with pytest.raises(BadRequest, match='"if_none" is true or false'):
        archive.link(first, body)


# ---------------------------------------------------------------------------- the chain


def test_the_walk_follows_next_editions_to_the_last_version(archive: ArchiveService) -> None:
    first, second, third, new = (deposit(archive) for _ in range(4))
    archive.link(first, {"next_edition": second})
    archive.link(second, {"next_edition": third})
    end = walk(ServiceClient(archive), first, {new})  # type: ignore[arg-type]
    assert (end.last, end.linked) == (third, False)


def test_a_new_version_is_linked_after_the_last_one_with_a_conditional_link(
    archive: ArchiveService,
) -> None:
    first, second, new = deposit(archive), deposit(archive), deposit(archive)
    archive.link(first, {"next_edition": second})
    client = ServiceClient(archive)
    assert link_next_version(client, first, {"ibip": new}) == second  # type: ignore[arg-type]
    assert client.links == [(second, {"next_edition": new, "if_none": True})]
    assert chain(archive, first) == [first, second, new]


def test_a_release_already_in_the_chain_is_not_linked_again(archive: ArchiveService) -> None:
    first, second = deposit(archive), deposit(archive)
    client = ServiceClient(archive)
    link_next_version(client, first, {"ibip": second})  # type: ignore[arg-type]
    assert link_next_version(client, first, {"ibip": second}) == first  # type: ignore[arg-type]
    assert len(client.links) == 1


def test_a_release_that_loses_the_race_links_after_the_winner(archive: ArchiveService) -> None:
    first, winner, loser = deposit(archive), deposit(archive), deposit(archive)

    class Racing(ServiceClient):
        def link(self, label: str, body: dict[str, Any]) -> dict[str, Any]:
            if not self.links:  # the other release links first, between our walk and our link
                archive.link(label, {"next_edition": winner, "if_none": True})
            return super().link(label, body)

    client = Racing(archive)
    assert link_next_version(client, first, {"ibip": loser}) == winner  # type: ignore[arg-type]
    assert [label for label, _ in client.links] == [first, winner]
    assert chain(archive, first) == [first, winner, loser]


def test_a_loop_in_the_chain_is_reported(archive: ArchiveService) -> None:
    first, second, new = deposit(archive), deposit(archive), deposit(archive)
    archive.link(first, {"next_edition": second})
    archive.link(second, {"next_edition": first})
    with pytest.raises(ReleaseError, match=f"the edition chain from {first} loops at {first}"):
        walk(ServiceClient(archive), first, {new})  # type: ignore[arg-type]


def test_a_version_the_archive_does_not_hold_is_reported_with_what_to_give(
    archive: ArchiveService,
) -> None:
    first, new = deposit(archive), deposit(archive)
    archive.link(first, {"next_edition": "8JMKD3MGP8W/3FSUP4L"})
    with pytest.raises(ReleaseError) as refused:
        walk(ServiceClient(archive), first, {new})  # type: ignore[arg-type]
    said = str(refused.value)
    assert said.startswith(f"8JMKD3MGP8W/3FSUP4L, reached from {first}, is not held by")
    assert "give the previous version held there" in said


def test_a_release_cannot_follow_itself(archive: ArchiveService) -> None:
    new = deposit(archive)
    with pytest.raises(ReleaseError, match="is this release itself"):
        link_next_version(ServiceClient(archive), new, {"ibip": new})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- settings


GITHUB = {
    "GITHUB_REPOSITORY": "inpe/ibi",
    "GITHUB_RUN_ID": "7001",
    "GITHUB_RUN_ATTEMPT": "1",
    "GITHUB_REF_TYPE": "tag",
    "GITHUB_REF_NAME": "v1.2.0",
    "IBI_FILES": "dist/*.tar.gz\n\n  dist/*.whl  \n",
    "IBI_ARCHIVE_ENDPOINT": "http://archive.test",
    "IBI_RESOLVER_URL": RESOLVER,
}


def test_settings_read_the_inputs_and_what_github_gives(tmp_path: Path) -> None:
    settings = Settings.from_environ({**GITHUB, "GITHUB_WORKSPACE": str(tmp_path)})
    assert settings.files == ("dist/*.tar.gz", "dist/*.whl")
    assert (settings.repository, settings.run_id, settings.tag) == ("inpe/ibi", "7001", "v1.2.0")
    assert settings.citation == tmp_path / "CITATION.cff"
    assert settings.sign is None and not settings.annotate


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        ("IBI_FILES", "files: give the release's files"),
        ("IBI_ARCHIVE_ENDPOINT", "archive-endpoint is missing (IBI_ARCHIVE_ENDPOINT): the"),
        ("IBI_RESOLVER_URL", "resolver-url is missing (IBI_RESOLVER_URL): the base of"),
        ("GITHUB_RUN_ID", "the workflow run's id is missing (GITHUB_RUN_ID)"),
    ],
)
def test_a_missing_setting_is_named(missing: str, said: str) -> None:
    env = {k: v for k, v in GITHUB.items() if k != missing}
    with pytest.raises(ReleaseError, match=said.replace("(", r"\(").replace(")", r"\)")):
        Settings.from_environ(env)


def test_the_idempotency_key_is_the_repository_the_run_and_the_version() -> None:
    assert idempotency_key("inpe/ibi", "7001", "1.2.0") == "gh:inpe/ibi:7001:1.2.0"
    assert idempotency_key("inpe/ibi", "7001", "1.2 beta") == "gh:inpe/ibi:7001:1.2-beta"
    long = idempotency_key("o/" + "r" * 300, "7001", "1.0")
    assert len(long) == 200 and long != idempotency_key("o/" + "r" * 300, "7002", "1.0")


@pytest.mark.parametrize(
    ("tag", "version"),
    [("v1.2.0", "1.2.0"), ("V2", "2"), ("1.0", "1.0"), ("release-5", "release-5"), (None, None)],
)
def test_a_tag_names_the_version(tag: str | None, version: str | None) -> None:
    assert version_of_tag(tag) == version


def test_the_metadata_comes_from_the_inputs_before_citation_cff() -> None:
    settings = Settings.from_environ(
        {**GITHUB, "IBI_TITLE": "Given", "IBI_CREATORS": "Banon, Gerald\nINPE", "IBI_VERSION": "2"}
    )
    citation = {"title": "Filed", "version": "9.9", "authors": [{"name": "Nobody"}]}
    described = release.metadata(settings, citation, TODAY)
    assert (described.title, described.creators, described.version) == (
        "Given",
        ("Banon, Gerald", "INPE"),
        "2",
    )
    assert described.dc["creator"] == ["Banon, Gerald", "INPE"]
    assert described.dc["date"] == ["2026-11-20"] and described.dc["type"] == ["software"]


def test_without_inputs_the_metadata_is_citation_cffs_and_the_version_the_tags() -> None:
    settings = Settings.from_environ(GITHUB)
    citation = {
        "title": "Filed",
        "authors": [{"family-names": "Banon", "given-names": "G."}],
        "version": "1.1.0",  # the previous release's, as the committed file says
    }
    described = release.metadata(settings, citation, TODAY)
    assert (described.title, described.creators, described.version) == (
        "Filed",
        ("Banon, G.",),
        "1.2.0",
    )
    untagged = Settings.from_environ({**GITHUB, "GITHUB_REF_TYPE": "branch"})
    assert release.metadata(untagged, citation, TODAY).version == "1.1.0"


def test_missing_metadata_is_named_with_where_to_give_it() -> None:
    settings = Settings.from_environ({**GITHUB, "GITHUB_REF_TYPE": "branch"})
    with pytest.raises(ReleaseError, match="title and creators and version: the action's inputs"):
        release.metadata(settings, None, TODAY)


def test_files_are_found_by_glob_and_kept_at_their_names(tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "app-1.2.0.tar.gz").write_bytes(b"tarball")
    (tmp_path / "dist" / "app-1.2.0-py3-none-any.whl").write_bytes(b"wheel")
    settings = Settings.from_environ({**GITHUB, "GITHUB_WORKSPACE": str(tmp_path)})
    found = {a.path: a for a in release.artefacts(settings)}
    assert sorted(found) == ["app-1.2.0-py3-none-any.whl", "app-1.2.0.tar.gz"]
    tarball = found["app-1.2.0.tar.gz"]
    assert tarball.sha256 == hashlib.sha256(b"tarball").hexdigest() and tarball.size == 7
    assert tarball.content_type == "application/gzip"


def test_a_glob_that_matches_nothing_is_named(tmp_path: Path) -> None:
    settings = Settings.from_environ({**GITHUB, "GITHUB_WORKSPACE": str(tmp_path)})
    with pytest.raises(ReleaseError, match=r"files: nothing matches 'dist/\*.tar.gz'"):
        release.artefacts(settings)


def test_two_files_of_one_name_are_refused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "app.zip").write_bytes(folder.encode())
    env = {**GITHUB, "GITHUB_WORKSPACE": str(tmp_path), "IBI_FILES": "*/app.zip"}
    with pytest.raises(ReleaseError, match=r"two files are named app\.zip"):
        release.artefacts(Settings.from_environ(env))


# ---------------------------------------------------------------------------- CITATION.cff


VERSION = cff.Version(
    title="ibi",
    creators=("Banon, Gerald J. F.", "INPE"),
    version="1.2.0",
    released=TODAY,
    persistent_url=f"{RESOLVER}/8JMKD3MGP8W/3FSUP4L",
    concept_url=f"{RESOLVER}/8JMKD3MGP8W/3FSUP2A!",
)


def test_a_new_citation_file_is_valid_cff_with_both_urls_as_identifiers() -> None:
    text = cff.dump(cff.with_version(None, VERSION))
    data = valid_cff(text)
    assert data["authors"] == [
        {"family-names": "Banon", "given-names": "Gerald J. F."},
        {"name": "INPE"},
    ]
    assert data["version"] == "1.2.0" and data["date-released"] == "2026-11-20"
    assert [i["value"] for i in data["identifiers"]] == [
        f"{RESOLVER}/8JMKD3MGP8W/3FSUP4L",
        f"{RESOLVER}/8JMKD3MGP8W/3FSUP2A!",
    ]
    assert cff.concept_of(cff.load(text), RESOLVER) == "8JMKD3MGP8W/3FSUP2A"


def test_an_existing_citation_file_keeps_its_fields_and_drops_an_earlier_versions_urls() -> None:
    existing = cff.load(
        "cff-version: 1.2.0\n"
        "message: Cite me.\n"
        "title: ibi, the software\n"
        "authors:\n  - family-names: Banon\n    given-names: Lise\n"
        "date-released: 2025-01-02\n"
        "version: 1.1.0\n"
        "identifiers:\n"
        "  - type: doi\n    value: 10.5281/zenodo.1234\n"
        f"  - type: url\n    value: {RESOLVER}/8JMKD3MGP8W/3FSUP3B\n"
        f"  - type: url\n    value: {RESOLVER}/8JMKD3MGP8W/3FSUP2A!\n"
        "keywords: [identifiers]\n"
    )
    assert existing["date-released"] == "2025-01-02"  # text, as the schema wants it
    data = valid_cff(cff.dump(cff.with_version(existing, VERSION)))
    assert data["title"] == "ibi, the software" and data["message"] == "Cite me."
    assert data["authors"] == [{"family-names": "Banon", "given-names": "Lise"}]
    assert data["version"] == "1.2.0" and data["keywords"] == ["identifiers"]
    assert [i["value"] for i in data["identifiers"]] == [
        f"{RESOLVER}/8JMKD3MGP8W/3FSUP4L",
        f"{RESOLVER}/8JMKD3MGP8W/3FSUP2A!",
        "10.5281/zenodo.1234",
    ]


def test_creators_and_authors_convert_both_ways() -> None:
    authors = [
        {"family-names": "Beethoven", "name-particle": "van", "given-names": "Ludwig"},
        {"name": "Instituto Nacional de Pesquisas Espaciais"},
        {"given-names": "Mononym"},
    ]
    creators = cff.creators_of(authors)
    assert creators == [
        "van Beethoven, Ludwig",
        "Instituto Nacional de Pesquisas Espaciais",
        "Mononym",
    ]
    assert cff.authors_of(["Banon, G.", " INPE "]) == [
        {"family-names": "Banon", "given-names": "G."},
        {"name": "INPE"},
    ]


def test_a_citation_file_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(cff.CitationFileError, match="not a YAML mapping"):
        cff.load("- a\n- b\n")
    with pytest.raises(cff.CitationFileError, match="is not YAML"):
        cff.load("title: [unclosed\n")


def test_a_citation_for_a_holding_takes_its_dublin_core() -> None:
    holding = {
        "dc": {"title": ["A dataset"], "creator": ["Banon, G."], "date": ["2024-03-05"],
               "type": ["Dataset"]},
    }  # fmt: skip
    data = valid_cff(
        cff.dump(
            cff.citation_for(
                holding,
                ibi="8JMKD3MGP8W/3FSUP4L",
                resolver=RESOLVER,
                existing=None,
                concept=None,
                version="2",
                today=TODAY,
            )
        )
    )
    assert (data["title"], data["type"], data["date-released"]) == (
        "A dataset",
        "dataset",
        "2024-03-05",
    )
    assert data["identifiers"][1]["value"] == f"{RESOLVER}/8JMKD3MGP8W/3FSUP4L!"


# ---------------------------------------------------------------------------- what GitHub shows


def outcome(tmp_path: Path) -> Outcome:
    files = (
        Artefact("app 1.tar.gz", tmp_path / "a", "ab" * 32, 7, "application/gzip"),
        Artefact("app.whl", tmp_path / "b", "cd" * 32, 5, "application/zip"),
    )
    return Outcome(
        ibi="8JMKD3MGP8W/3FSUP4L",
        rep="sid.inpe.br/x/2026/11.20.00.00",
        persistent_url=f"{RESOLVER}/8JMKD3MGP8W/3FSUP4L",
        concept="8JMKD3MGP8W/3FSUP2A",
        concept_url=f"{RESOLVER}/8JMKD3MGP8W/3FSUP2A!",
        follows="8JMKD3MGP8W/3FSUP3B",
        version="1.2.0",
        files=files,
        citation=tmp_path / "CITATION.cff",
    )


def test_the_summary_lists_each_files_sha256_and_url(tmp_path: Path) -> None:
    text = release.summary(outcome(tmp_path))
    assert "### Release 1.2.0: IBI `8JMKD3MGP8W/3FSUP4L`" in text
    assert (
        f"| [`app 1.tar.gz`]({RESOLVER}/8JMKD3MGP8W/3FSUP4L/app%201.tar.gz) | 7 | `{'ab' * 32}` |"
        in text
    )
    assert f"| `{'cd' * 32}` |" in text
    assert "the next edition of `8JMKD3MGP8W/3FSUP3B`" in text
    assert f"{RESOLVER}/8JMKD3MGP8W/3FSUP4L?ibiurl.verblist=GetFileList" in text


def test_the_outputs_and_summary_go_where_github_reads_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings.from_environ(
        {
            **GITHUB,
            "GITHUB_OUTPUT": str(tmp_path / "out"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        }
    )
    release.report(settings, outcome(tmp_path))
    lines = (tmp_path / "out").read_text().splitlines()
    assert f"persistent-url={RESOLVER}/8JMKD3MGP8W/3FSUP4L" in lines
    assert f"concept-url={RESOLVER}/8JMKD3MGP8W/3FSUP2A!" in lines
    assert "ibi=8JMKD3MGP8W/3FSUP4L" in lines and "previous-ibi=8JMKD3MGP8W/3FSUP3B" in lines
    assert "### Release 1.2.0" in (tmp_path / "summary.md").read_text()
    assert f"{'ab' * 32}  app 1.tar.gz" in capsys.readouterr().out


# ---------------------------------------------------------------------------- failures


def client_answering(status: int, body: bytes) -> Any:
    def transport(method: str, url: str, **_: Any) -> Raw:
        if status == 0:
            raise ApiError(0, f"cannot reach {url}: [Errno 111] Connection refused")
        return Raw(status, {"Content-Type": "application/json"}, body)

    return lambda settings: ArchiveClient(
        settings.endpoint, sign=False, retries=0, transport=transport
    )


def test_a_role_the_archive_refuses_fails_before_anything_is_minted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    refused = client_answering(403, b'{"message": "User: ... is not authorized"}')
    status = release.main({**GITHUB, "GITHUB_ACTIONS": "true"}, client_for=refused)
    out, err = capsys.readouterr()
    assert status == 1
    assert "refused these credentials" in err and "CiRoleArn" in err
    assert out.startswith("::error title=IBI release::the Archive at http://archive.test refused")


def test_an_endpoint_that_does_not_answer_says_to_check_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = release.main(GITHUB, client_for=client_answering(0, b""))
    err = capsys.readouterr().err
    assert status == 1
    assert "cannot reach http://archive.test/api/service" in err
    assert "check archive-endpoint" in err


def test_an_endpoint_that_is_not_a_url_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    status = release.main({**GITHUB, "IBI_ARCHIVE_ENDPOINT": "archive.example.org"})
    assert status == 1
    assert (
        "archive-endpoint: 'archive.example.org' is not an http(s) URL" in capsys.readouterr().err
    )


# ---------------------------------------------------------------------------- the action


def test_the_actions_inputs_reach_the_program_and_its_outputs_are_the_programs(
    tmp_path: Path,
) -> None:
    import re

    import yaml

    root = Path(__file__).resolve().parents[2]
    action = yaml.safe_load((root / "action.yml").read_text())
    steps = {s.get("id") or s["name"]: s for s in action["runs"]["steps"]}
    install = next(s for s in action["runs"]["steps"] if "Install ibi" in s["name"])
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"  # its own version
    assert '"$ACTION_PATH"' in install["run"]
    program = steps["release"]
    assert program["run"].endswith("-m ibi_tools.release")
    given = {name for name in program["env"] if name.startswith("IBI_")}
    read = set(re.findall(r'"(IBI_[A-Z_]+)"', Path(release.__file__).read_text()))
    assert given == read
    for name, value in program["env"].items():
        given_as = name.removeprefix("IBI_").lower().replace("_", "-")
        assert value == f"${{{{ inputs.{given_as} }}}}"
    made = {name for name, _ in release.outputs(outcome(tmp_path))}
    assert set(action["outputs"]) == made
    for name, output in action["outputs"].items():
        assert output["value"] == f"${{{{ steps.release.outputs.{name} }}}}"
