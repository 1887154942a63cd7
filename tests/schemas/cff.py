"""CITATION.cff checked as ``cffconvert --validate`` checks it: against the Citation File Format
1.2.0 JSON schema (``citation-file-format-1.2.0.json`` beside this module, as published at tag
1.2.0 of github.com/citation-file-format/citation-file-format, CC-BY-4.0), formats included.

cffconvert itself (2.0.0) pins jsonschema below 4, which the other dev tools need: its
validation is the same schema read by the same library.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA = Path(__file__).parent / "citation-file-format-1.2.0.json"


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )


def valid_cff(text: str) -> dict[str, Any]:
    """The file's mapping, once it is valid CFF 1.2.0 (read as YAML 1.1 with dates as text, as
    the schema wants them; an unquoted date would be refused there, as cffconvert does)."""
    data = yaml.load(text, Loader=_Text)  # a SafeLoader
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.path))
    if errors:
        said = "\n".join(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors)
        raise AssertionError(f"not valid CFF 1.2.0:\n{said}\n---\n{text}")
    assert isinstance(data, dict)
    return data


class _Text(yaml.SafeLoader):
    pass


_Text.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
