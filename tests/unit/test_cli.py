"""The `ibi` command's contract outputs (label, inspect) and its error behaviour."""

from __future__ import annotations

import json

import pytest

from ibi_tools.cli import main

TABLE_6_2 = [
    ("1287587646.394023", "1287587646.394023", "1287587646", "2010/10.20.15.14.06"),
    ("1287588012.2930", "1287588012.293", "1287588000", "2010/10.20.15.20"),
    ("1287588115.186234", "1287588115.186234", "1287588060", "2010/10.20.15.21"),
    ("1287588115.3462", "1287588115.3462", "1287588115", "2010/10.20.15.21.55"),
    ("1287588115.99623", "1287588115.99623", "1287588116", "2010/10.20.15.21.56"),
    ("1287588116.72", "1287588116.72", "1287588117", "2010/10.20.15.21.57"),
    ("1287588539.788342", "1287588539.788342", "1287588480", "2010/10.20.15.28"),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_label_date_json(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(
        capsys, "label", "--date", "1287588115.0470", "--host", "mtc-m18.sid.inpe.br",
        "--ip", "150.163.34.243", "--json",
    )  # fmt: skip
    assert status == 0
    assert json.loads(out) == {
        "date": "1287588115.047",
        "rep": "sid.inpe.br/mtc-m18/2010/10.20.15.21.55.047",
        "ibip": "8JMKD3MGP8W/38EREAMW3DP",
    }
    assert list(json.loads(out)) == ["date", "rep", "ibip"]


def test_label_gives_only_the_forms_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "label", "--date", "1234806360", "--ip", "150.163.34.243", "--json")
    assert json.loads(out) == {"date": "1234806360", "ibip": "8JMKD3MGP8W/34PGRBS"}
    _, out, _ = run(
        capsys, "label", "--date", "1234806360", "--host", "mtc-m18.sid.inpe.br",
        "--rep-port", "8080", "--json",
    )  # fmt: skip
    assert json.loads(out) == {
        "date": "1234806360",
        "rep": "sid.inpe.br/mtc-m18.8080/2009/02.16.17.46",
    }


def test_label_dry_run_reproduces_table_6_2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["label", "--host", "mtc-m18.sid.inpe.br", "--granularity", "1", "--json"]
    for request, *_ in TABLE_6_2:
        argv += ["--at", request]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["request"], r["date"], r["rep"]) for r in rows] == [
        (normalized, date, f"sid.inpe.br/mtc-m18/{suffix}")
        for _, normalized, date, suffix in TABLE_6_2
    ]
    assert all(list(row) == ["request", "date", "rep"] for row in rows)


def test_label_dry_run_changes_granularity(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(
        capsys, "label", "--ip", "127.0.0.1", "--granularity", "60",
        "--at", "1287588115.3462", "--at", "1287588115.3462@0.01", "--at", "1287588115.3462",
        "--json",
    )  # fmt: skip
    assert status == 0
    dates = [json.loads(line)["date"] for line in out.splitlines()]
    # Algorithm 4 keeps to the shortest date later than the last: minute, second, tenth.
    assert dates == ["1287588060", "1287588115", "1287588115.3"]


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        (
            "8jmkd3mgp8w/35mme4e",
            {"form": "ibip", "label": "8JMKD3MGP8W/35MME4E", "prefix": "8JMKD3MGP8W",
             "suffix": "35MME4E", "date": "1248182580", "iso": "2009-07-21T13:23:00Z",
             "ip": "150.163.34.243", "port": 800},
        ),
        (
            "SID.inpe.br/mtc-m18@80/2009/07.21.13.23",
            {"form": "rep", "label": "sid.inpe.br/mtc-m18@80/2009/07.21.13.23",
             "prefix": "sid.inpe.br/mtc-m18@80", "suffix": "2009/07.21.13.23",
             "date": "1248182580", "iso": "2009-07-21T13:23:00Z",
             "host": "mtc-m18.sid.inpe.br", "port": 80},
        ),
        (
            "sid.inpe.br/mtc-m18/2010/10.20.15.21.55.047",
            {"form": "rep", "label": "sid.inpe.br/mtc-m18/2010/10.20.15.21.55.047",
             "prefix": "sid.inpe.br/mtc-m18", "suffix": "2010/10.20.15.21.55.047",
             "date": "1287588115.047", "iso": "2010-10-20T15:21:55.047Z",
             "host": "mtc-m18.sid.inpe.br", "port": 80},
        ),
    ],
)  # fmt: skip
def test_inspect_json(
    capsys: pytest.CaptureFixture[str], label: str, expected: dict[str, object]
) -> None:
    status, out, err = run(capsys, "inspect", label, "--json")
    assert (status, err) == (0, "")
    assert json.loads(out) == expected


@pytest.mark.parametrize(
    "label", ["", "8JMKD3MGP8W/35MMIE4E", "8JMKD3MGP8W", "sid.inpe.br/x/2009/13.01.00.00", "a b/c"]
)
def test_inspect_invalid_label_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], label: str
) -> None:
    status, out, err = run(capsys, "inspect", label, "--json")
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("ibi: invalid IBI")


@pytest.mark.parametrize(
    "argv",
    [
        ["label", "--json"],
        ["label", "--date", "1e9", "--json"],
        ["label", "--date", "1287588115", "--at", "1287588115"],
        ["label", "--at", "1287588115@7"],
        ["label", "--date", "1287588115", "--host", "localhost"],
        ["label", "--date", "1287588115", "--ip", "300.1.1.1"],
        ["label", "--date", "100", "--ip", "127.0.0.1"],
        ["label", "--date", "1287588115", "--rep-port", "x"],
        ["mint"],
        ["mint", "--endpoint", "ftp://example.org"],
        ["nonsense"],
    ],
)
def test_usage_errors_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("ibi:")
