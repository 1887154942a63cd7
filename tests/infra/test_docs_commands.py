"""Issue 13 item 9: every `cdk` command of the deployment docs, run against the synthesized app.

Each fenced command line starting ``node_modules/.bin/cdk`` (continuations joined, comments
dropped) is parsed as the CLI would: its ``-c key=value`` context (a string, as the CLI passes
it, over cdk.json's) and the stacks it names. The app is synthesized with that context (cdk-nag
on, bundling skipped) and every named stack must be in it: a command the docs show never
answers "No stacks match".
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from aws_cdk import App, Stack

from infra.config import REPO_ROOT, cdk_json_context
from infra.stacks import build_app
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra

DOCS = ("deploy.md", "deploy-archive.md", "deploy-minting.md", "ci-minting.md")
FENCE = re.compile(r"```(?:sh|bash|console)?\n(.*?)```", re.DOTALL)
CDK = "node_modules/.bin/cdk"


def commands() -> list[tuple[str, str]]:
    """(document, command) for every cdk command in a fenced block of the docs."""
    found = []
    for name in DOCS:
        for block in FENCE.findall((REPO_ROOT / "docs" / name).read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                if line.strip().startswith(CDK):
                    found.append((name, line.strip()))
    return found


def parse(command: str) -> tuple[str, dict[str, str], list[str]]:
    """The subcommand, the ``-c`` context and the stacks named (shlex, comments dropped)."""
    words = shlex.split(command, comments=True)
    assert words[0] == CDK
    subcommand, rest = words[1], words[2:]
    context: dict[str, str] = {}
    stacks: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in {"-c", "--context"}:
            key, _, value = rest[index + 1].partition("=")
            context[key] = value
            index += 2
            continue
        assert not word.startswith("-") or word == "--all", f"unknown option {word}"
        stacks.append(word)
        index += 1
    return subcommand, context, stacks


COMMANDS = commands()


def test_the_docs_have_cdk_commands() -> None:
    subcommands = {parse(command)[0] for _, command in COMMANDS}
    assert {"synth", "deploy", "bootstrap"} <= subcommands
    assert len(COMMANDS) >= 8


@pytest.mark.parametrize(("document", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_each_command_names_stacks_the_app_has(tmp_path: Path, document: str, command: str) -> None:
    subcommand, context, stacks = parse(command)
    assert "--all" not in stacks, f"{document}: name the stacks, never --all"
    app = build_app(
        App(outdir=str(tmp_path), context={**cdk_json_context(), **SKIP_BUNDLING, **context})
    )
    app.synth()  # raises on a ConfigError or an unacknowledged cdk-nag finding
    present = {child.node.id for child in app.node.children if isinstance(child, Stack)}
    if subcommand == "deploy":
        assert stacks, f"{document}: {command} names no stack"
    assert set(stacks) <= present, f"{document}: {command}: the app has {sorted(present)}"


def test_a_stack_the_app_lacks_is_caught() -> None:
    """Not vacuous: the old minting command (no ibi:stacks) names a stack the app lacks."""
    _, context, stacks = parse(f"{CDK} deploy IbiMinting")
    app = build_app(App(context={**cdk_json_context(), **SKIP_BUNDLING, **context}))
    present = {child.node.id for child in app.node.children if isinstance(child, Stack)}
    assert not set(stacks) <= present
