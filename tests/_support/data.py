"""Where the tests' data files lie, named once (no JAX imported: HLO tests read without it).

``DATA`` holds trimmed real profiler traces (``*.xplane.pb``); ``HLO_DATA`` holds HLO
modules written in the styles of JAX, PyTorch/XLA and XLA's dumps::

    tpukit.hlo.open(HLO_DATA / "jax_mlp.hlo")
"""

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
HLO_DATA = DATA / "hlo"
