"""tpukit's tests: one folder per package of ``tpukit/`` (``tests/hlo`` tests ``tpukit.hlo``),
``project/`` for what crosses packages (README, notebooks, JupyterLab, install, CLI,
architecture), ``_support/`` for the helpers several folders share, ``data/`` for files."""
