"""`python -m bench [--quick] [minting|resolution|startup|peer|flood …]`: run, save, write BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from bench import common
from bench.report import write_report

SUITES = ("minting", "resolution", "owners", "startup", "peer", "flood")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"any of {', '.join(SUITES)}")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (about 2 minutes)")
    args = parser.parse_args()
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suite(s) {sorted(unknown)}")
    for suite in args.suites or SUITES:
        module = __import__(f"bench.{suite}", fromlist=["run"])
        print(f"== {suite}", flush=True)
        result = module.run(args.quick)
        print(json.dumps(result, indent=1)[:2000], flush=True)
    write_report(Path(__file__).parents[1] / "BENCHMARKS.md", common.RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
