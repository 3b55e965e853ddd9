# The commands of the quick start: `make run`, `make test`, `make docs`. Each sets up .venv/ first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
PYTEST_ARGS ?=

.PHONY: install run test test-quick lint verify bench browser docs clean

# Re-install when the package metadata or the pins change (a stale venv is rebuilt in place).
$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/ampquiz serve

AXE := tests/browser/axe/node_modules/axe-core/axe.min.js

# The browser tests drive the system's Chromium (Playwright cannot download its own here), and
# check every page with axe-core (pinned in tests/browser/axe/package-lock.json, from npm).
browser: $(AXE)
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "Chromium is missing: install Debian's 'chromium' package (sudo apt-get install chromium)"; exit 1; fi; }

$(AXE): tests/browser/axe/package.json tests/browser/axe/package-lock.json
	cd tests/browser/axe && npm ci --no-audit --no-fund --loglevel=error
	@touch $(AXE)

DOCS_STAMP := $(VENV)/.docs-installed

# The docs extra (mkdocs-material) goes into the same .venv, so a fresh clone's `make docs` works.
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test,docs]'
	@touch $(DOCS_STAMP)

# The reference pages made from the code must be current (`ampquiz docs` rewrites them); then the
# site is built into site/, where a broken link or anchor fails the build.
docs: $(DOCS_STAMP)
	$(VENV)/bin/ampquiz docs --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The full gate CI runs: the linters and type checker, the docs, then every test.
test: install browser docs lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The inner loop, under a minute: the tests that run in pytest's own process only (no browser, no
# server, workers or command line started, no pool of their own, none that waits seconds on
# purpose). tests/support/tiers.py marks the rest `slow`; `make test` runs both tiers.
test-quick: install
	@start=$$(date +%s%N); \
	$(VENV)/bin/lint-imports && $(VENV)/bin/ampquiz lint questions/ && \
	$(PY) -m pytest -m 'not gpu and not slow' $(PYTEST_ARGS); status=$$?; \
	tenths=$$(( ($$(date +%s%N) - start) / 100000000 )); \
	echo "make test-quick: $$((tenths / 10)).$$((tenths % 10)) s"; \
	exit $$status

# Style (ruff), types (mypy over app and sandbox), the import layers, and the bank's own lint.
lint: install
	$(VENV)/bin/ruff check app sandbox tests bench
	$(VENV)/bin/ruff format --check app sandbox tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ampquiz lint questions/

verify: install
	$(VENV)/bin/ampquiz verify questions/

bench: install
	$(PY) bench/sandbox_latency.py
	$(PY) bench/explain_overhead.py
	$(PY) bench/verify_bank.py
	$(PY) bench/http.py

clean:
	rm -rf $(VENV) .pytest_cache tests/output tests/browser/axe/node_modules
