# ibi — the two commands a newcomer needs are `make run` and `make test`.
# Both set everything up first (Python venv, node tools, Lambda wheels), idempotently.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := .cache/stamps

export CDK_DISABLE_CLI_TELEMETRY := true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup run test lint typecheck unit integration e2e infra pages synth bench mutants shapes clean

setup: $(STAMP)/venv $(STAMP)/node $(STAMP)/wheelhouse $(STAMP)/chromium

$(STAMP)/venv: pyproject.toml
	@mkdir -p $(STAMP)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

# node_modules/: the CDK CLI, and dynalite, used only to copy an `ibi local` data directory
# from before local mode's tables (ibi_tools/local/datadir.py).
$(STAMP)/node: package.json package-lock.json
	@mkdir -p $(STAMP)
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# Lambda dependencies for arm64, downloaded once so that `cdk synth` bundles offline.
$(STAMP)/wheelhouse: $(wildcard functions/*/requirements.txt) $(STAMP)/venv
	$(BIN)/python -m infra.bundling --download
	@touch $@

# Headless Chromium for the page tests: Debian's packages (as root; otherwise say what to do).
$(STAMP)/chromium:
	@mkdir -p $(STAMP)
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "Install Chromium and ChromeDriver (Debian: sudo apt-get install chromium chromium-driver)"; exit 1; fi
	@touch $@

## The main job: minting service (and, as they land, Archives and resolver) on 127.0.0.1.
## ARGS go to `ibi local`: make run ARGS="--port 9800 --data-dir /tmp/ibi" (ibi local --help).
run: setup
	$(BIN)/ibi local $(ARGS)

## Everything CI checks: lint, format, types, then every test (unit, integration, infra, e2e).
test: setup lint typecheck
	$(BIN)/pytest

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m ibi_tools.lint

typecheck:
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest tests/unit
integration: setup
	$(BIN)/pytest tests/integration
e2e: setup
	$(BIN)/pytest tests/e2e
infra: setup
	$(BIN)/pytest tests/infra

pages: setup
	$(BIN)/pytest tests/pages

bench: setup
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench

## Each condition of the minting store weakened in turn (ibi_tools/mutants.py): every one must
## make a test fail. A few minutes, so not part of `make test`.
mutants: setup
	$(BIN)/python -m ibi_tools.mutants

## After changing an expression a store sends: record local mode's table contract again.
shapes: setup
	$(BIN)/python -m tests.dynamo_shapes

synth: setup
	CDK_OUTDIR=cdk.out $(BIN)/python app.py

clean:
	rm -rf $(VENV) node_modules cdk.out .cache .pytest_cache .mypy_cache .ruff_cache
