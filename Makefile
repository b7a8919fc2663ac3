# mirrorflow: two commands on a fresh clone: `make test` and `make demo`.
# The virtualenv is rebuilt only when pyproject.toml changes (the stamp file records the install).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYSPARK_VERSION := 4.3.0

.PHONY: install test unit integration lint demo demo-stop demo-status dev-up dev-down dev-status clean

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
	$(BIN)/ruff check include tests spark_apps plugins dags
	$(BIN)/python -m pytest

unit: install
	$(BIN)/python -m pytest tests/unit

integration: install
	$(BIN)/python -m pytest tests/integration

lint: install
	$(BIN)/ruff check include tests spark_apps plugins dags

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

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
