"""Tests of tpukit.datasets: MNIST download, cache, parsing and the bundled sample."""
