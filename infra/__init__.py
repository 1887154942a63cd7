"""The CDK app's constructs and stacks.

Importing this package first silences jsii's Node end-of-life banner (printed as Python bytes
on stderr by every process that loads aws_cdk on an end-of-life Node): jsii takes the variable
below as acknowledged only when it names the running Node's major version, so it is set to that,
once, unless the environment already sets it (the Makefile does too).
"""

from __future__ import annotations

import os
import shutil
import subprocess

SILENCE_VARIABLE = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"


def _node_major() -> str | None:
    node = shutil.which("node")
    if node is None:
        return None
    try:
        found = subprocess.run(  # noqa: S603
            [node, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except OSError:
        return None
    version = found.stdout.strip().removeprefix("v")
    return version.split(".")[0] if version[:1].isdigit() else None


if SILENCE_VARIABLE not in os.environ and (major := _node_major()) is not None:
    os.environ[SILENCE_VARIABLE] = major
