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

# The MNIST tutorial, end to end, on whatever device is here; the executed notebook
# (with its plots and graphs) and an HTML export are written to out/.
demo: $(VENV)/.installed
	$(BIN)/python scripts/run_notebook.py notebooks/01_mnist_mlp.ipynb -o out/01_mnist_mlp.ipynb

lint: $(VENV)/.installed
	$(BIN)/ruff check .

test: $(VENV)/.installed lint
	sh scripts/ensure_chromium.sh
	$(BIN)/python -m pytest -q
