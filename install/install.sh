#!/bin/sh
# Install tpukit from a terminal, with the same steps as install/install_tpukit.ipynb:
# tpukit itself from the project's source without touching anything else, then
# tpukit/_install.py (the one place that decides): keep a JAX that already sees the
# accelerator, install only the requirements that are missing or too old (read from the
# installed tpukit's metadata), then `python -m tpukit doctor`, which prints
# "tpukit works" only when a zoo model, a short fit, a checkpoint and a graph all work.
#
#   sh install/install.sh                                   # from the project's repository
#   TPUKIT_SOURCE=. sh install/install.sh                   # from a checkout
#   PYTHON=.venv/bin/python sh install/install.sh           # into another environment
#   PIP_OPTIONS="--no-index" TPUKIT_SOURCE=. sh install/install.sh   # offline
set -eu
PYTHON=${PYTHON:-python3}
SOURCE=${TPUKIT_SOURCE:-git+https://github.com/tpukit/tpukit}
PIP_OPTIONS=${PIP_OPTIONS:-}

fail() {
    echo "error: $1" >&2
    echo "next:  $2" >&2
    exit 1
}

"$PYTHON" -c "import sys; assert sys.version_info >= (3, 11)" 2>/dev/null \
    || fail "$PYTHON is not Python 3.11 or newer (JAX needs 3.11)" "set PYTHON=/path/to/python3.12 and run again"

echo "\$ pip install --no-deps $PIP_OPTIONS $SOURCE"
# shellcheck disable=SC2086
"$PYTHON" -m pip install -q --no-deps $PIP_OPTIONS "$SOURCE" || fail "pip could not install $SOURCE" \
    "check TPUKIT_SOURCE (a git URL or a checkout's path) and the network (or PIP_OPTIONS), then run this script again"

# The installed tpukit's folder, found without importing it (its dependencies may be missing).
folder=$("$PYTHON" -c "import importlib.util as u; print(u.find_spec('tpukit').submodule_search_locations[0])") \
    || fail "tpukit was installed but $PYTHON cannot find it" "run: $PYTHON -m pip show tpukit"
set --
for option in $PIP_OPTIONS; do set -- "$@" "--pip-option=$option"; done
"$PYTHON" "$folder/_install.py" "$@" || exit 1
echo "Next: jupyter lab notebooks/01_mnist_mlp.ipynb"
