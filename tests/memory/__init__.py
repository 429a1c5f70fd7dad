"""Tests of memory: the memory view, live ranges and the explained out-of-memory."""
