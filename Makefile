# The two set-up commands of the README: `make demo` (the main job) and `make test`.
# Each creates .venv with tpukit and its development tools when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python -m tpukit demo

lint: $(VENV)/.installed
	$(BIN)/ruff check .

test: $(VENV)/.installed lint
	sh scripts/ensure_chromium.sh
	$(BIN)/python -m pytest -q
