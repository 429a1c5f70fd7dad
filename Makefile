# The two set-up commands of the README: `make demo` (the main job) and `make test`.
# Each creates .venv with tpukit and its development tools when it is missing.
# `make test-oldest` runs the same suite in .venv-oldest, on the oldest supported versions
# (pyproject.toml's lower bounds, pinned by scripts/oldest_constraints.py).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
OLDEST := .venv-oldest

.PHONY: demo test test-oldest lint

# ESLint, for the graph viewer's JavaScript, at the versions package-lock.json pins
# (npm ci installs them into node_modules/ when it is missing or the lock changed).
node_modules/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "make lint needs Node.js and npm for ESLint (apt-get install -y nodejs npm)"; exit 1; }
	npm ci --no-audit --no-fund
	touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# The MNIST tutorial, end to end, on whatever device is here; the executed notebook
# (with its plots and graphs) and an HTML export are written to out/.
demo: $(VENV)/.installed
	$(BIN)/python scripts/run_notebook.py notebooks/01_mnist_mlp.ipynb -o out/01_mnist_mlp.ipynb

lint: $(VENV)/.installed node_modules/.installed
	$(BIN)/ruff check .
	node_modules/.bin/eslint --max-warnings 0 .

test: $(VENV)/.installed lint
	sh scripts/ensure_chromium.sh
	$(BIN)/python -m pytest -q

# The dev tools come at their newest; every runtime dependency at its lower bound. The
# check fails the lane if pip installed anything else than the pins.
$(OLDEST)/.installed: pyproject.toml scripts/oldest_constraints.py
	test -x $(OLDEST)/bin/python || $(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install -q -U pip
	$(OLDEST)/bin/python scripts/oldest_constraints.py > $(OLDEST)/constraints.txt
	$(OLDEST)/bin/python -m pip install -q -c $(OLDEST)/constraints.txt -e '.[dev]'
	$(OLDEST)/bin/python scripts/oldest_constraints.py --check
	touch $@

test-oldest: $(OLDEST)/.installed
	sh scripts/ensure_chromium.sh
	$(OLDEST)/bin/python scripts/oldest_constraints.py --check
	$(OLDEST)/bin/python -m pytest -q
