"""Write ``functions/shared/openapi.json`` from ``docs/openapi.yaml`` (its one source).

Run after editing the YAML: ``python -m ibi_tools.openapi``. The services serve the JSON
(``functions/shared/openapi.py``); ``tests/unit/test_openapi.py`` fails while the two differ.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "docs" / "openapi.yaml"
TARGET = REPO / "functions" / "shared" / "openapi.json"


def as_json(source: Path = SOURCE) -> str:
    """The YAML document as the JSON text the services ship."""
    document: Any = yaml.safe_load(source.read_text(encoding="utf-8"))
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    TARGET.write_text(as_json(), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(REPO)} from {SOURCE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
