"""What the executable says about itself: XLA's cost analysis and its memory figures.

The program's `tpukit.hlo.Cost` combines XLA's ``cost_analysis`` (read here) with
tpukit's own count from the HLO; ``Memory`` is the device memory XLA assigned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def xla_cost_analysis(executable: Any) -> dict[str, float]:
    """XLA's ``cost_analysis()`` figures (``flops``, ``bytes accessed``...), or ``{}``."""
    try:
        analysis = executable.cost_analysis()
    except Exception:  # some backends do not implement it
        return {}
    if isinstance(analysis, (list, tuple)):  # JAX < 0.4.38 returned one dict per device
        analysis = analysis[0] if analysis else {}
    return dict(analysis or {})


@dataclass(frozen=True)
class Memory:
    """Device memory a compiled program needs, in bytes (per device for SPMD programs).

    ``alias_bytes`` are output bytes that reuse (donated) argument buffers.
    """

    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    generated_code_bytes: int
    alias_bytes: int

    @property
    def total_bytes(self) -> int:
        """Arguments + outputs + temporaries + code, counting aliased buffers once."""
        return (
            self.argument_bytes
            + self.output_bytes
            - self.alias_bytes
            + self.temp_bytes
            + self.generated_code_bytes
        )


def memory_of(executable: Any) -> Memory | None:
    """Read ``memory_analysis()``; fields vary between backends, so each defaults to 0."""
    try:
        stats = executable.memory_analysis()
    except Exception:
        return None
    if stats is None:
        return None

    def field(name: str) -> int:
        return int(getattr(stats, name, 0) or 0)

    return Memory(
        argument_bytes=field("argument_size_in_bytes"),
        output_bytes=field("output_size_in_bytes"),
        temp_bytes=field("temp_size_in_bytes"),
        generated_code_bytes=field("generated_code_size_in_bytes"),
        alias_bytes=field("alias_size_in_bytes"),
    )
