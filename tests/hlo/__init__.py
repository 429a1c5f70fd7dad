"""Tests of tpukit.hlo: reading HLO text (parser, fast paths) and its analysis (counts, costs)."""
