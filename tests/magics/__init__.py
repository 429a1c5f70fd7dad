"""Tests of tpukit.magics: the IPython magics in a real shell, and bad input typed into them."""
