"""Tests of tpukit.zoo: the models, their counts against the compiler, torch weights."""
