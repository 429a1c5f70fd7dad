"""Tests of tpukit.train: fit, evaluate, checkpoints, interrupts, options, sharding."""
