"""Issue 15: a newcomer's first hour with ``ibi local``.

Registration keys rotate with a command and the rotation survives a restart (before, a restart
quietly registered the old key again); the landing page's examples are the demo's own items
(before, the spec's IBIs: 404 locally); the "Try:" lines name an ``ibi`` that runs as printed;
``make run`` takes ``ibi local``'s options.
"""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from ibi.client import ApiError, ArchiveClient, switch_archive
from ibi_tools.local.stores import free_port
from tests.e2e.support import IBI, LocalRun

ROOT = Path(__file__).resolve().parents[2]


def _rotate(data_dir: Path, archive: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*IBI, "local", "--data-dir", str(data_dir), "--rotate-key", archive],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _switched_on(local: LocalRun, key: str) -> bool:
    archive = ArchiveClient(local.archives[0], sign=False)
    try:
        answer = switch_archive(archive, local.resolver, key, on=True)
    except ApiError as error:
        assert error.status == 403, error  # refused: the key is not the registered one
        return False
    return "status.archive included" in answer


def _key(data_dir: Path) -> str:
    return (data_dir / "keys" / "archive-a.key").read_text().strip()


def test_a_rotated_registration_key_works_at_once_and_after_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    local = LocalRun(data_dir, free_port()).start()
    try:
        old = _key(data_dir)
        rotated = _rotate(data_dir, "archive-a")
        assert rotated.returncode == 0, rotated.stderr
        assert "registered at the running resolver" in rotated.stdout
        new = _key(data_dir)
        assert new != old and (data_dir / "keys" / "archive-a.key").stat().st_mode & 0o077 == 0
        assert _switched_on(local, new) and not _switched_on(local, old)
    finally:
        local.stop()
    again = LocalRun(data_dir, local.port).start()  # the restart registers the new key
    try:
        assert _switched_on(again, new) and not _switched_on(again, old)
    finally:
        again.stop()
    offline = _rotate(data_dir, "archive-a")  # not running: kept for the next start
    assert offline.returncode == 0 and "registered at the next start" in offline.stdout
    assert _key(data_dir) not in {old, new}


def test_rotating_the_key_of_an_unknown_archive_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "archive-a.key").write_text("1-2\n")
    refused = _rotate(tmp_path, "archive-z")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "archive-z" in line and "archive-a" in line


def test_the_landing_page_shows_the_demo_items_and_each_resolves(tmp_path: Path) -> None:
    local = LocalRun(tmp_path / "data", free_port(), demo=True).start()
    try:
        with urllib.request.urlopen(local.resolver + "/", timeout=10) as answer:
            page = answer.read().decode()
        examples = re.findall(r'<li><a href="/([^"]+)">', page)
        assert examples, page
        demo = (tmp_path / "data" / "demo.json").read_text()
        opener = urllib.request.build_opener(NoRedirect())
        for example in examples:
            assert f'"/{example}"' in demo.replace("&amp;", "&")
            try:
                opener.open(f"{local.resolver}/{example.replace('&amp;', '&')}", timeout=10)
            except urllib.error.HTTPError as error:
                assert error.code == 302, (example, error.code)
    finally:
        local.stop()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def test_the_try_lines_name_an_ibi_that_runs(local: LocalRun) -> None:
    tried = [line.split()[0] for line in local.banner if line.startswith("  ") and " mint " in line]
    assert tried, local.banner
    command = tried[0]
    ran = subprocess.run(
        [command, "--version"], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert ran.returncode == 0 and ran.stdout.startswith("ibi "), (command, ran.stderr)


def test_make_run_passes_its_args_to_ibi_local() -> None:
    dry = subprocess.run(
        ["make", "-n", "run", "ARGS=--port 9911 --data-dir /tmp/elsewhere"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert dry.returncode == 0, dry.stderr
    assert "ibi local --port 9911 --data-dir /tmp/elsewhere" in dry.stdout
