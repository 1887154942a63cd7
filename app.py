#!/usr/bin/env python3
"""The CDK app: every IBI service's stack, checked by cdk-nag (see infra/stacks.py).

Run by ``cdk synth`` (cdk.json) or directly: ``CDK_OUTDIR=cdk.out python app.py``. Either way
it reads ``cdk.json``'s context, needs no AWS credentials, no network and no Docker.
"""

from infra.config import cdk_json_context  # first: infra/__init__.py quiets jsii's Node banner
from infra.stacks import build_app


def main() -> None:
    from aws_cdk import App

    build_app(App(context=cdk_json_context())).synth()


if __name__ == "__main__":
    main()
