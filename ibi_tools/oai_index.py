"""Put an Archive's records into OAI-PMH's index, once, after the stack added the index.

    python -m ibi_tools.oai_index <items table> [--region REGION]

Records written by a version before the index lack its keys (``oai_set``, ``oai_datestamp``),
so OAI-PMH's lists do not see them until this has run over the table (docs/deploy-archive.md).
It reads the table a Scan page at a time and gives each such record its keys (a conditional
update on its version: a record changed meanwhile got them from that change). Running it again
finds nothing left to do. Credentials and region as the AWS CLI's (``AWS_PROFILE``...).
Local mode needs none of this: an earlier data directory's table is indexed at its start.
"""

from __future__ import annotations

import argparse
import sys

from functions.archive.store import DynamoItemStore, index_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ibi_tools.oai_index", description=__doc__)
    parser.add_argument("table", help="the Archive's items table (the stack's ItemsTable)")
    parser.add_argument("--region", help="its AWS region (default: the AWS CLI's)")
    options = parser.parse_args(argv)
    import boto3  # (an operator's tool: the client is built here, used by the store)

    client = boto3.client("dynamodb", region_name=options.region)
    indexed = index_all(DynamoItemStore(client, options.table))
    sys.stdout.write(f"{options.table}: {indexed} records put into OAI-PMH's index\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
