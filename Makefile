# The two set-up commands of the README: `make demo` (the main job) and `make test`.
# Each creates .venv with tpukit and its development tools when it is missing.
# `make test-oldest` runs the same suite in .venv-oldest, on the oldest supported versions
# (pyproject.toml's lower bounds, pinned by scripts/oldest_constraints.py).
# Both lanes install the development tools (pytest, ruff, Playwright, JupyterLab...) at the
# exact versions of constraints/dev.txt (scripts/dev_constraints.py refreshes it); each
# prints its wall time and pytest's 25 slowest tests.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
OLDEST := .venv-oldest
DEV_PINS := constraints/dev.txt
# Two workers (the CI machine's two cores), each taking whole test files so that a
# file's module fixtures (a JupyterLab server, a browser, a compiled step) are made once.
PYTEST := -m pytest -q --durations=25 -n 2 --dist loadfile

.PHONY: demo test test-oldest lint

# ESLint, for the graph viewer's JavaScript, at the versions package-lock.json pins
# (npm ci installs them into node_modules/ when it is missing or the lock changed).
node_modules/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "make lint needs Node.js and npm for ESLint (apt-get install -y nodejs npm)"; exit 1; }
	npm ci --no-audit --no-fund
	touch $@

# Two makes at once (two demos, a demo and the tests) install one at a time: under the
# lock, the second finds $(VENV)/.made up to date and installs nothing.
$(VENV)/.installed: pyproject.toml $(DEV_PINS)
	mkdir -p $(VENV)
	if command -v flock >/dev/null; then flock $(VENV)/.lock $(MAKE) --no-print-directory $(VENV)/.made; \
	else $(MAKE) --no-print-directory $(VENV)/.made; fi
	touch $@

$(VENV)/.made: pyproject.toml $(DEV_PINS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -c $(DEV_PINS) -e '.[dev]'
	$(BIN)/python scripts/dev_constraints.py --check
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
	@start=$$(date +%s); $(BIN)/python $(PYTEST); status=$$?; \
	echo "make test: the suite took $$(( $$(date +%s) - start )) s"; exit $$status

# The dev tools at their pins; every runtime dependency at its lower bound. The checks
# fail the lane if pip installed anything else than the pins.
$(OLDEST)/.installed: pyproject.toml scripts/oldest_constraints.py $(DEV_PINS)
	test -x $(OLDEST)/bin/python || $(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install -q -U pip
	$(OLDEST)/bin/python scripts/oldest_constraints.py > $(OLDEST)/constraints.txt
	$(OLDEST)/bin/python -m pip install -q -c $(OLDEST)/constraints.txt -c $(DEV_PINS) -e '.[dev]'
	$(OLDEST)/bin/python scripts/oldest_constraints.py --check
	$(OLDEST)/bin/python scripts/dev_constraints.py --check
	touch $@

test-oldest: $(OLDEST)/.installed
	sh scripts/ensure_chromium.sh
	$(OLDEST)/bin/python scripts/oldest_constraints.py --check
	@start=$$(date +%s); $(OLDEST)/bin/python $(PYTEST); status=$$?; \
	echo "make test-oldest: the suite took $$(( $$(date +%s) - start )) s"; exit $$status
