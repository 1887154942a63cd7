"""The state file of an import: what it has done, kept so that it continues where it stopped
(JSON, written aside then renamed over)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ibi_tools.harvest.oai import HarvestError

STATE_VERSION = 1


@dataclass
class ImportState:
    """What an import has done, kept in a JSON file so that it continues where it stopped."""

    path: Path
    archive: str  # the Archive's service IBI
    repository: str
    set_spec: str | None
    from_date: str | None
    token: str | None = None  # the resumption token of the page being read (None: the first)
    complete: bool = False  # the whole list was read (a new run reads it again)
    done: dict[str, str] = field(default_factory=dict)  # OAI identifier -> IBI
    tombstoned: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # OAI identifier -> why (last run)
    skipped: dict[str, str] = field(default_factory=dict)  # unusable (too large) -> why
    stopped: str | None = None  # why the list was stopped short (a token again …), last run

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        archive: str,
        repository: str,
        set_spec: str | None,
        from_date: str | None,
    ) -> ImportState:
        """The state in ``path``, or a new one; one of another import is refused."""
        state = cls(path, archive, repository, set_spec, from_date)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return state
        except (OSError, ValueError) as error:
            raise HarvestError(
                f"{path}: not a state file of `ibi archive import` ({error})"
            ) from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise HarvestError(f"{path}: not a state file of `ibi archive import`")
        theirs = tuple(data.get(k) for k in ("archive", "repository", "set", "from"))
        if theirs != (archive, repository, set_spec, from_date):
            raise HarvestError(
                f"{path} is the state of another import ({theirs[1]} into {theirs[0]}, set "
                f"{theirs[2]}, from {theirs[3]}): give this one its own --state FILE"
            )
        state.token, state.complete = data.get("token"), bool(data.get("complete"))
        state.done, state.tombstoned = dict(data["done"]), dict(data["tombstoned"])
        state.failed = dict(data.get("failed", {}))
        state.skipped, state.stopped = dict(data.get("skipped", {})), data.get("stopped")
        return state

    def save(self) -> None:
        """Written aside, flushed, then renamed over the old one: never half a file."""
        data = {
            "version": STATE_VERSION,
            "archive": self.archive,
            "repository": self.repository,
            "set": self.set_spec,
            "from": self.from_date,
            "token": self.token,
            "complete": self.complete,
            "done": self.done,
            "tombstoned": self.tombstoned,
            "failed": self.failed,
            "skipped": self.skipped,
            "stopped": self.stopped,
        }
        aside = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        text = json.dumps(data, sort_keys=True)  # (one line: written in C, not a key at a time)
        with aside.open("w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        aside.replace(self.path)


def default_state_path(
    archive: str, repository: str, set_spec: str | None, since: str | None
) -> Path:
    """``./ibi-import-<host>-<digest>.json``: one file per Archive, repository, set and date."""
    digest = hashlib.sha256(f"{archive}\n{repository}\n{set_spec}\n{since}".encode()).hexdigest()
    host = re.sub(r"[^A-Za-z0-9.-]", "_", urlsplit(repository).hostname or "repository")
    return Path.cwd() / f"ibi-import-{host}-{digest[:10]}.json"
