#!/bin/sh
# Install tpukit from a terminal, with the same checks as install/install_tpukit.ipynb:
# keep a JAX that already sees the accelerator, install the matching JAX build only when
# it does not, install tpukit without touching anything else, then verify.
#
#   sh install/install.sh                                   # from the published location
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

pip_install() {
    echo "\$ pip install $*"
    # shellcheck disable=SC2086
    "$PYTHON" -m pip install -q $PIP_OPTIONS "$@" || fail "pip could not install $*" \
        "check the source and the network (or PIP_OPTIONS), then run this script again"
}

"$PYTHON" -c "import sys; assert sys.version_info >= (3, 10)" 2>/dev/null \
    || fail "$PYTHON is not Python 3.10 or newer" "set PYTHON=/path/to/python3.11 and run again"

hardware=cpu
if [ -e /dev/nvidia0 ]; then hardware=gpu; fi
if grep -qs 0x1ae0 /sys/bus/pci/devices/*/vendor || ls /dev/accel* >/dev/null 2>&1; then hardware=tpu; fi
echo "Accelerator hardware: $hardware"

backend=$("$PYTHON" -c "import jax; print(jax.default_backend())" 2>/dev/null || echo none)
echo "Installed JAX uses: $backend"
if [ "$backend" != "$hardware" ]; then
    case $hardware in
        tpu) extra="[tpu]" ;;
        gpu) if nvidia-smi 2>/dev/null | grep -Eq "CUDA Version: 1[3-9]"; then extra="[cuda13]"; else extra="[cuda12]"; fi ;;
        *) extra="" ;;
    esac
    echo "JAX does not see the $hardware: installing jax$extra"
    pip_install -U "jax$extra"
    backend=$("$PYTHON" -c "import jax; print(jax.default_backend())" 2>/dev/null || echo none)
    [ "$backend" = "$hardware" ] || fail "JAX still uses '$backend', not the $hardware" \
        "check the driver (nvidia-smi) or TPU runtime, then run: $PYTHON -m pip install -U \"jax$extra\""
else
    echo "Keeping the installed JAX: it already sees the accelerator."
fi

pip_install --no-deps "$SOURCE"
missing=$("$PYTHON" -c "
import importlib.util as u
needed = [('flax', 'flax'), ('optax', 'optax'), ('orbax.checkpoint', 'orbax-checkpoint'), ('tqdm', 'tqdm'),
          ('matplotlib', 'matplotlib'), ('IPython', 'ipython')]
print(' '.join(p for m, p in needed if u.find_spec(m) is None))")
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    pip_install $missing
fi

"$PYTHON" -m tpukit info || fail "tpukit is installed but cannot list the devices" "read the message above"
"$PYTHON" -c "
import jax, tpukit
compiled = tpukit.compile(lambda x: jax.numpy.tanh(x @ x.T).sum(), tpukit.shape('f32[256,256]'))
print(compiled)
print('tpukit works: compiled and ran a function on', jax.devices()[0].device_kind, '->', float(compiled(jax.numpy.ones((256, 256)))))
" || fail "the verification compile failed" "run $PYTHON -m tpukit info and report the error"
echo "Done. Next: jupyter notebook notebooks/01_mnist_mlp.ipynb"
