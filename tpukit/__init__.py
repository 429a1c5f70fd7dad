"""tpukit."""
