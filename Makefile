# mirrorflow: two commands on a fresh clone: `make test` and `make demo`.
# The virtualenv is rebuilt only when a pyproject.toml or constraints.txt changes (the stamp file records the
# install). constraints.txt holds the exact versions CI tests; pyproject.toml only ranges.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYSPARK_VERSION := $(shell sed -n 's/^pyspark==//p' constraints.txt)

.PHONY: check chromium constraints install test unit integration lint docs docs-serve docs-reference demo demo-stop demo-status dev-up dev-down dev-status screenshots site-screenshots clean

install: $(STAMP)

$(STAMP): pyproject.toml dev/pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	@# The product (editable, with its test and demo extras) and the checkout's development tooling.
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]" -e ./dev
	@# apache-airflow-providers-apache-spark pulls pyspark-client, whose files overwrite pyspark's
	@# Python side with an older version; put pyspark back (its jars were never touched).
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall "pyspark==$(PYSPARK_VERSION)"
	@$(BIN)/python -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '$(PYSPARK_VERSION)' else 'pyspark is ' + v)"
	@touch $(STAMP)

# The exact versions of everything the .venv holds, for reproducible installs (after upgrading a range on purpose).
constraints: install
	@{ sed -n '1,2p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -iv '^mirrorflow'; } > constraints.txt.new
	@mv constraints.txt.new constraints.txt

# Test processes (pytest-xdist): each runs whole test files, with its own embedded clusters, Spark Connect server
# and Airflow home. Most of a test's time is waiting on those, so two workers suit two cores.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile

# The whole suite (what CI runs), listing its 25 slowest tests at the end.
test: lint
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) --durations=25

# Before a commit: lint and the fast tests (no broker, no Spark, no Airflow server), about a minute.
check: lint
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) tests/unit tests/dags -m "not integration" -q

unit: install
	$(BIN)/python -m pytest tests/unit

integration: install
	$(BIN)/python -m pytest tests/integration

lint: install
	$(BIN)/ruff check include dev tests dags benchmarks
	$(BIN)/ruff format --check include dev tests dags benchmarks
	$(BIN)/lint-imports --no-cache
	@$(MAKE) --no-print-directory docs

# The documentation site (MkDocs with the Material theme) into build/site, in strict mode: a broken link or anchor,
# a page missing from the navigation or a configuration reference out of date with config/keys.py fails it.
# NO_MKDOCS_2_WARNING: Material's end-of-life notice, which docs/development/docs.md answers.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: install
	$(MKDOCS) build --strict --quiet

# Preview at http://127.0.0.1:8000, rebuilt on every save.
docs-serve: install
	$(MKDOCS) serve --strict

# Rewrite the generated configuration reference after changing a key in config/keys.py.
docs-reference: install
	$(BIN)/python -m mirrorflow_dev.docs.reference

dev-up dev-down dev-status: install
	$(BIN)/mirrorflow dev $(subst dev-,,$@)

demo: install
	$(BIN)/mirrorflow demo up

# No `install` prerequisite: stopping must work without (re)installing anything.
demo-stop:
	@if [ -x $(BIN)/mirrorflow ]; then $(BIN)/mirrorflow demo down; \
	else echo "no $(VENV), so no demo was started from it (if one ran before 'make clean': make install demo-stop)"; fi

demo-status:
	@if [ -x $(BIN)/mirrorflow ]; then $(BIN)/mirrorflow demo status; \
	else echo "no $(VENV): run 'make demo' first"; exit 3; fi

CHROMIUM := /usr/bin/chromium

# Debian's headless Chromium for the browser tests and the screenshots: installed when missing and this user can
# (root, or sudo without a password); otherwise one line saying how.
chromium:
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	else echo "error: $(CHROMIUM) is missing and this user cannot install it (not root, no sudo)."; \
		echo "Install Debian's chromium package as root (apt-get install chromium), then run this again."; \
		exit 1; fi; \
	echo "installing Debian's chromium (for $(CHROMIUM))..."; \
	$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
	|| { $$SUDO apt-get update -q >/dev/null && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } \
	|| { echo "error: could not install Debian's chromium; install it (apt-get install chromium) and try again."; exit 1; }; \
	test -x $(CHROMIUM) || { echo "error: the chromium package did not provide $(CHROMIUM)."; exit 1; }

# The documentation's screenshots of the Airflow UI (docs/img/*.png) in headless Chromium; needs `make demo` running.
screenshots: install chromium
	$(BIN)/python -m mirrorflow_dev.docs.screenshots

# The documentation site's own pictures (docs/img/site-*.png): its landing page and the configuration reference.
site-screenshots: docs chromium
	$(BIN)/python -m mirrorflow_dev.docs.site_screenshots

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
