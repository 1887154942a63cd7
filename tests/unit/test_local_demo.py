"""The demo of `ibi local` (ibi_tools/local/demo.py): a data directory seeded before issue 34
prints what its URLs answer now."""

from __future__ import annotations

import json
from pathlib import Path

from ibi_tools.local.demo import ensure_demo


def test_a_demo_seeded_before_issue_34_says_what_its_urls_answer_now(tmp_path: Path) -> None:
    before = [
        {"path": "/X/1", "expect": 302, "what": "a report"},
        {
            "path": "/X/2?ibiurl.requireditemstatus=Original",
            "expect": 409,
            "what": "two Archives claim the original (every Archive asked)",
        },
        {
            "path": "/X/3",
            "expect": 409,
            "what": "archive-b plants an original of an IBI archive-a never deposited: not followed",
        },
    ]
    (tmp_path / "demo.json").write_text(json.dumps(before))
    urls = ensure_demo(tmp_path, "http://a", "http://b", "http://m", "sub")  # nothing seeded
    assert [(u.path, u.expect) for u in urls] == [
        ("/X/1", 302),
        ("/X/2?ibiurl.requireditemstatus=Original", 302),
        ("/X/3", 404),
    ]
    assert "archive-a's word" in urls[2].what
    kept = json.loads((tmp_path / "demo.json").read_text())
    assert [entry["expect"] for entry in kept] == [302, 302, 404]  # written back
    assert ensure_demo(tmp_path, "http://a", "http://b", "http://m", "sub") == urls
