# mirrorflow: two commands on a fresh clone: `make test` and `make demo`.
# The virtualenv is rebuilt only when pyproject.toml changes (the stamp file records the install).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYSPARK_VERSION := 4.3.0

.PHONY: install test unit integration lint demo demo-stop dev-up dev-down dev-status clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@# apache-airflow-providers-apache-spark pulls pyspark-client, whose files overwrite pyspark's
	@# Python side with an older version; put pyspark back (its jars were never touched).
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall "pyspark==$(PYSPARK_VERSION)"
	@$(BIN)/python -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '$(PYSPARK_VERSION)' else 'pyspark is ' + v)"
	@touch $(STAMP)

test: install
	$(BIN)/ruff check include tests spark_apps
	$(BIN)/python -m pytest

unit: install
	$(BIN)/python -m pytest tests/unit

integration: install
	$(BIN)/python -m pytest tests/integration

lint: install
	$(BIN)/ruff check include tests spark_apps

dev-up dev-down dev-status: install
	$(BIN)/mirrorflow dev $(subst dev-,,$@)

demo: install
	@echo "make demo arrives with the Airflow issue: it will start both embedded clusters, Airflow"
	@echo "(standalone, 127.0.0.1) with the mirrorflow DAGs, a demo producer, and print the UI address"
	@echo "and login. Today: 'make dev-up' starts the two clusters (primary 127.0.0.1:19092, backup 127.0.0.1:29092)."
	@exit 1

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
