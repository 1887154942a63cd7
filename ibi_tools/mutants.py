"""``python -m ibi_tools.mutants`` (``make mutants``): every guard of the minting store is
proven by a test that fails without it.

Each mutant weakens one condition of ``functions/minting/store.py`` (made always true, an
operator changed, a clause removed) and names the tests that must then fail. The runner runs
those tests once unchanged (they must pass), then once per mutant in a pytest process of its
own that loads this module as a plugin (``-p ibi_tools.mutants``): with ``IBI_MUTANT`` set, it
compiles the mutated source in place of ``functions.minting.store`` before any test imports
it. Nothing is written to disk, so other work in the tree is undisturbed; the local
gateway's workers are forked, so they run the mutant too. A mutant is *killed* when a test
fails, and *survives* when all pass; the run exits 1 unless every mutant is killed.

The tests run over moto and over local mode's tables. Those tables refuse every call shape no
store makes (their contract), which would kill an operator mutant for the wrong reason: under
a mutant the contract is lifted, and the tables judge a call by what it asks, as moto does. A
mutant whose failing run shows a ``ValidationException`` (the mutated request is malformed)
is reported MALFORMED, not killed.

An edit's text must occur exactly once in store.py: when the store changes, a mutant that no
longer applies is an error, to be updated here, never skipped.

    python -m ibi_tools.mutants                  # every mutant
    python -m ibi_tools.mutants --list
    python -m ibi_tools.mutants claim/always-true --tests tests/unit/test_mint_record_guards.py
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STORE = "functions.minting.store"
VARIABLE = "IBI_MUTANT"
SHAPE_LOG = "IBI_RECORD_DYNAMO_SHAPES"
ROOT = Path(__file__).resolve().parents[1]

GUARDS = "tests/unit/test_mint_record_guards.py"
STORE_TESTS = "tests/unit/test_minting_store.py"
HANDLER = "tests/integration/test_minting_handler.py"
CONCURRENCY = "tests/integration/test_concurrency.py"
AUDIT = "tests/integration/test_minting_audit.py"
STATE_TESTS = (GUARDS, STORE_TESTS, HANDLER, CONCURRENCY)
KEY_TESTS = (GUARDS, STORE_TESTS, HANDLER)
RECORD_TESTS = (AUDIT, CONCURRENCY)

# An attribute no item has: ``attribute_not_exists`` on it is always true.
NOWHERE = '"no_such_attribute"'
AFTER_STATE = 'condition = "attribute_not_exists(#subsystem) OR #last < :first"'
FIRST_BLOCK = 'condition = "attribute_not_exists(#subsystem)"\n'
SUBSYSTEM_NAME = 'names["#subsystem"] = "subsystem"'
RECORD = 'ConditionExpression="attribute_not_exists(#subsystem)",\n'
RECORD_NAMES = 'ExpressionAttributeNames={"#subsystem": "subsystem"},\n'
RELEASE = 'ConditionExpression="#status = :in_progress",\n'
TAKE_OVER = '"#status = :in_progress AND #lease = :seen"'
RESERVATION_START = '"SET #from = if_not_exists(#last, :none), #last = :new, "'


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    weakens: str  # the guard, and how, in words
    edits: tuple[tuple[str, str], ...]  # (text of store.py, its replacement)
    tests: tuple[str, ...]

    def apply(self, source: str) -> str:
        for old, new in self.edits:
            found = source.count(old)
            if found != 1:
                raise LookupError(
                    f"mutant {self.name}: {old!r} occurs {found} times in store.py, not once; "
                    "update ibi_tools/mutants.py to the store as it is"
                )
            source = source.replace(old, new)
        return source


MUTANTS = (
    Mutant(
        "advance/after-state/always-true",
        "a write without a read (no blocks): attribute_not_exists on an absent attribute",
        (
            (
                f"{AFTER_STATE}\n            {SUBSYSTEM_NAME}",
                f'{AFTER_STATE}\n            names["#subsystem"] = {NOWHERE}',
            ),
        ),
        STATE_TESTS,
    ),
    Mutant(
        "advance/after-state/<=",
        "a write without a read: `#last < :first` turned into `<=`",
        (("#last < :first", "#last <= :first"),),
        STATE_TESTS,
    ),
    Mutant(
        "advance/after-state/no-first-write-clause",
        "a write without a read: `attribute_not_exists(#subsystem) OR` removed",
        ((f"{AFTER_STATE}\n            {SUBSYSTEM_NAME}\n", 'condition = "#last < :first"\n'),),
        STATE_TESTS,
    ),
    Mutant(
        "advance/after-state/no-order-clause",
        "a write without a read: `OR #last < :first` removed",
        (
            (AFTER_STATE, 'condition = "attribute_not_exists(#subsystem)"'),
            ('            values[":first"] = _n(write.first)\n', ""),
        ),
        STATE_TESTS,
    ),
    Mutant(
        "advance/first-block/always-true",
        "a subsystem's first block: attribute_not_exists on an absent attribute",
        (
            (
                f"{FIRST_BLOCK}            {SUBSYSTEM_NAME}",
                f'{FIRST_BLOCK}            names["#subsystem"] = {NOWHERE}',
            ),
        ),
        STATE_TESTS,
    ),
    Mutant(
        "advance/block/always-true",
        "a block after the first: `#last = :previous` replaced by attribute_not_exists on an "
        "absent attribute",
        (
            (
                'condition = "#last = :previous"\n'
                '            values[":previous"] = _n(write.previous)\n',
                'condition = "attribute_not_exists(#subsystem)"\n'
                f'            names["#subsystem"] = {NOWHERE}\n',
            ),
        ),
        STATE_TESTS,
    ),
    Mutant(
        "advance/block/>=",
        "a block after the first: `#last = :previous` turned into `>=` (the state never goes "
        "below a date it held: always true)",
        (('"#last = :previous"', '"#last >= :previous"'),),
        STATE_TESTS,
    ),
    Mutant(
        "advance/block/<",
        "a block after the first: `#last = :previous` turned into `<` (never true)",
        (('"#last = :previous"', '"#last < :previous"'),),
        STATE_TESTS,
    ),
    Mutant(
        "put_record/always-true",
        "the record's (subsystem, first_date): attribute_not_exists on an absent attribute",
        (
            (
                RECORD + "            " + RECORD_NAMES,
                RECORD + '            ExpressionAttributeNames={"#subsystem": ' + NOWHERE + "},\n",
            ),
        ),
        STATE_TESTS,
    ),
    Mutant(
        "put_record/no-condition",
        "the record's condition removed (a repeated first date overwrites)",
        ((RECORD + "            " + RECORD_NAMES, ""),),
        STATE_TESTS,
    ),
    Mutant(
        "advance/reservation/no-start",
        "the record of reservations: the state's write no longer keeps where its reservation "
        "starts (a killed request's dates then seem reserved from the subsystem's beginning)",
        ((RESERVATION_START, '"SET #from = :none, #last = :new, "'),),
        RECORD_TESTS,
    ),
    Mutant(
        "advance/reservation/wrong-owner",
        "the record of reservations: the state names the request id as who reserved its dates",
        (('":by": {"S": write.requester}', '":by": {"S": write.request_id}'),),
        RECORD_TESTS,
    ),
    Mutant(
        "list_records/newest-first-ignored",
        "the record newest first: ScanIndexForward=False no longer sent (oldest first always)",
        (('            query["ScanIndexForward"] = False\n', "            pass\n"),),
        RECORD_TESTS,
    ),
    Mutant(
        "list_records/since-exclusive",
        "the record from a date: `>= :since` turned into `>` (the record at `since` left out)",
        (
            (
                'bound = (">", after) if cursor else (">=", since)',
                'bound = (">", after) if cursor else (">", since)',
            ),
        ),
        RECORD_TESTS,
    ),
    Mutant(
        "record_holding/<",
        "the record of an IBI: `first_date <= :date` turned into `<` (an IBI that begins its "
        "record is not found, or found in the record before)",
        (('bound=("<=", date), limit=1', 'bound=("<", date), limit=1'),),
        RECORD_TESTS,
    ),
    Mutant(
        "claim/always-true",
        "an Idempotency-Key's claim: attribute_not_exists on an absent attribute",
        (('names={"#key": "key"},', 'names={"#key": ' + NOWHERE + "},"),),
        KEY_TESTS,
    ),
    Mutant(
        "claim/status-always-true",
        "a claim taking a dead attempt's key: `#status = :in_progress` turned into `<=` "
        '(true of both statuses the store writes: "complete" sorts first)',
        (
            (
                "(#status = :in_progress AND #lease < :now",
                "(#status <= :in_progress AND #lease < :now",
            ),
        ),
        KEY_TESTS,
    ),
    Mutant(
        "claim/lease-<=",
        "a claim taking a dead attempt's key: `#lease < :now` turned into `<=`",
        (("#lease < :now", "#lease <= :now"),),
        KEY_TESTS,
    ),
    Mutant(
        "claim/lease-always-true",
        "a claim taking a dead attempt's key: its lease compared with a time 30 years on",
        (('values={":now": _n(now)},', 'values={":now": _n(now + 10**9)},'),),
        KEY_TESTS,
    ),
    Mutant(
        "claim/no-minted-clause",
        "a claim taking a dead attempt's key: `AND attribute_not_exists(minted)` removed",
        ((" AND attribute_not_exists(minted))", ")"),),
        KEY_TESTS,
    ),
    Mutant(
        "take_over/status-always-true",
        "a take-over: `#status = :in_progress` turned into `<=` (true of both statuses)",
        ((TAKE_OVER, '"#status <= :in_progress AND #lease = :seen"'),),
        KEY_TESTS,
    ),
    Mutant(
        "take_over/lease-always-true",
        "a take-over: `#lease = :seen` turned into `>=` (leases only grow: always true)",
        ((TAKE_OVER, '"#status = :in_progress AND #lease >= :seen"'),),
        KEY_TESTS,
    ),
    Mutant(
        "note/released-key",
        "noting a key's first date: `OR attribute_not_exists(#status)` added (a released "
        "key noted)",
        (
            (
                '{"ConditionExpression": "#status = :in_progress"}',
                '{"ConditionExpression": "#status = :in_progress OR '
                'attribute_not_exists(#status)"}',
            ),
        ),
        KEY_TESTS,
    ),
    Mutant(
        "release/always-true",
        "releasing a key: `#status = :in_progress` turned into `<=` (true of both statuses)",
        ((RELEASE, 'ConditionExpression="#status <= :in_progress",\n'),),
        KEY_TESTS,
    ),
    Mutant(
        "release/no-condition",
        "releasing a key: its condition removed (a completed key's answer deleted)",
        (
            (
                RELEASE + "            ExpressionAttributeNames=STATUS,\n"
                "            ExpressionAttributeValues=IN_PROGRESS,\n",
                "",
            ),
        ),
        KEY_TESTS,
    ),
)


def mutant_named(name: str) -> Mutant:
    for mutant in MUTANTS:
        if mutant.name == name:
            return mutant
    raise KeyError(f"no mutant is named {name!r}; `python -m ibi_tools.mutants --list`")


# -- the pytest plugin --------------------------------------------------------------------------


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: list[str]) -> None:
    """Before the first conftest imports the store: with ``IBI_MUTANT``, the mutated store."""
    name = os.environ.get(VARIABLE)
    if name:
        install(mutant_named(name))


def pytest_report_header(config: Any) -> str | None:
    name = os.environ.get(VARIABLE)
    return f"mutant: {name} ({mutant_named(name).weakens})" if name else None


def install(mutant: Mutant) -> None:
    """Make ``functions.minting.store`` the mutated source, compiled under its own path."""
    if STORE in sys.modules:
        raise RuntimeError(f"{STORE} was imported before the mutant could replace it")
    spec = importlib.util.find_spec(STORE)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{STORE} not found")
    source = mutant.apply(Path(spec.origin).read_text())
    module = importlib.util.module_from_spec(spec)
    sys.modules[STORE] = module
    code = compile(source, spec.origin, "exec")
    exec(code, module.__dict__)  # noqa: S102 -- the store's own source, one condition weakened
    setattr(sys.modules["functions.minting"], "store", module)  # noqa: B010
    lift_contract()


def lift_contract() -> None:
    """Local mode's tables refuse every call shape no store makes (their contract); a mutant
    sends one by design, so the contract is lifted and the tables judge the call by what it
    asks, as moto does, rather than by its shape."""
    from ibi_tools.local.tables import contract

    setattr(contract, "refused_shape", lambda shape: False)  # noqa: B010


# -- the runner ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    passed: bool
    seconds: float
    first_failure: str  # the first failing test, or the error that stopped the run
    invalid: bool = False  # a ValidationException in the output: the mutant is malformed

    @property
    def verdict(self) -> str:
        """killed; SURVIVED (every test passed); MALFORMED (DynamoDB refused the request)."""
        if self.passed:
            return "SURVIVED"
        return "MALFORMED" if self.invalid else "killed"


def run_tests(mutant: Mutant | None, tests: Sequence[str]) -> Outcome:
    """``tests`` (stopping at the first failure) with ``mutant`` installed, or unchanged."""
    # (never recorded as the calls the stores make: tests/dynamo_shapes.py)
    environment = {k: v for k, v in os.environ.items() if k not in (VARIABLE, SHAPE_LOG)}
    if mutant is not None:
        environment[VARIABLE] = mutant.name
    command = [sys.executable, "-m", "pytest", "-p", "ibi_tools.mutants", "-x", "-q"]
    command += ["-p", "no:cacheprovider", *tests]
    started = time.monotonic()
    done = subprocess.run(  # noqa: S603 -- this interpreter's pytest, on our own tests
        command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False
    )
    failures = re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - |$)", done.stdout, re.MULTILINE)
    if done.returncode not in (0, 1):  # not "some tests failed": a usage or collection error
        failures = failures or (done.stdout.strip() or done.stderr.strip()).splitlines()[-1:]
    first = str(failures[0]) if failures else ""
    invalid = "ValidationException" in done.stdout  # DynamoDB refused the mutated request
    return Outcome(done.returncode == 0, time.monotonic() - started, first, invalid)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ibi_tools.mutants", description=__doc__)
    parser.add_argument("names", nargs="*", help="the mutants to run (default: all)")
    parser.add_argument("--tests", nargs="+", help="run these tests instead of each mutant's")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    options = parser.parse_args(argv)
    mutants = [mutant_named(name) for name in options.names] or list(MUTANTS)
    if options.list:
        for mutant in mutants:
            print(f"{mutant.name:44} {mutant.weakens}")
        return 0
    source = (ROOT / "functions" / "minting" / "store.py").read_text()
    for mutant in mutants:
        mutant.apply(source)  # every mutant still applies, before anything runs
    everything = sorted({t for m in mutants for t in options.tests or m.tests}, key=_order)
    baseline = run_tests(None, everything)
    if not baseline.passed:
        print(f"the tests fail without a mutant ({baseline.first_failure}): fix them first")
        return 2
    print(f"baseline: {' '.join(everything)} pass unchanged ({baseline.seconds:.0f} s)")
    unproven = []
    for mutant in mutants:
        outcome = run_tests(mutant, options.tests or mutant.tests)
        print(f"{outcome.verdict:9} {mutant.name:44} {outcome.seconds:4.0f} s", end="")
        print(f" by {outcome.first_failure}" if outcome.first_failure else "", flush=True)
        if outcome.verdict != "killed":
            unproven.append(f"{mutant.name} ({outcome.verdict.lower()})")
    print(f"{len(mutants) - len(unproven)} of {len(mutants)} mutants killed", end="")
    print(f"; not killed: {', '.join(unproven)}" if unproven else "")
    return 1 if unproven else 0


def _order(test: str) -> int:
    return STATE_TESTS.index(test) if test in STATE_TESTS else len(STATE_TESTS)


if __name__ == "__main__":
    sys.exit(main())
