"""Tests of tpukit.compilation: compile, the ledger, call lines, NaN search, module scopes, plots."""
