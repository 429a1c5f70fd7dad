"""Tests of tpukit.runtime: devices, launch of several processes, one program in flight."""
