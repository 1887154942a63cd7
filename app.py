#!/usr/bin/env python3
"""The CDK app: every IBI service's stack, checked by cdk-nag (see infra/stacks.py).

Run by ``cdk synth`` (cdk.json) or directly: ``CDK_OUTDIR=cdk.out python app.py``. Either way
it reads ``cdk.json``'s context, needs no AWS credentials, no network and no Docker. A setting
the app refuses (infra/config.py, infra/guardrails.py) is one line on stderr, not a traceback.
"""

import sys

from infra.config import (  # first: infra/__init__.py quiets jsii's Node banner
    ConfigError,
    cdk_json_context,
)
from infra.stacks import build_app


def main() -> int:
    from aws_cdk import App

    try:
        build_app(App(context=cdk_json_context())).synth()
    except ConfigError as error:
        print(f"ibi: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
