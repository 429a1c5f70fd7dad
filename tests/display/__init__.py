"""Tests of tpukit.display: the one table description and its styles in the frontends."""
