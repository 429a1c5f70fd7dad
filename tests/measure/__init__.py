"""Tests of tpukit.measure: profiles, traces of real machines and their verdicts."""
