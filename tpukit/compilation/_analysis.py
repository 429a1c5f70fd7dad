"""What a compile costs and needs: FLOPs, bytes and memory.

XLA's own ``cost_analysis`` is best effort: on GPU it leaves out convolutions
that become cuDNN calls (VGG19 on 100 images: about 6.8e9 FLOPs reported where
the network needs about 3.9e12). tpukit therefore also counts the FLOPs of every
dot and convolution from the shapes in the optimized HLO, and reports the larger
of the two figures as ``Cost.flops``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpukit.hlo import HloModule, dot_conv_flops


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of one execution of a compiled program.

    Attributes:
      flops: the best estimate: the larger of ``counted_flops`` and ``backend_flops``.
      counted_flops: 2 x multiply-adds of every dot and convolution, counted by
        tpukit from the optimized HLO's shapes (cuBLAS/cuDNN calls included).
      backend_flops: XLA's ``cost_analysis`` figure, or ``None`` when it gives none.
      transcendentals: exp, log, tanh... as counted by XLA (``None`` if unknown).
      bytes_accessed: bytes read and written, as counted by XLA (``None`` if unknown).
    """

    flops: float
    counted_flops: int
    backend_flops: float | None
    transcendentals: float | None
    bytes_accessed: float | None

    @property
    def flops_source(self) -> str:
        """Which figure ``flops`` is: ``"tpukit"`` (dot/conv count) or ``"xla"``."""
        if self.backend_flops is None or self.counted_flops > self.backend_flops:
            return "tpukit"
        return "xla"

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte accessed: high means compute-bound, low means memory-bound."""
        if not self.bytes_accessed:
            return None
        return self.flops / self.bytes_accessed


def cost_of(executable: Any, optimized: HloModule) -> Cost:
    """Combine XLA's cost analysis of ``executable`` with tpukit's dot/conv count."""
    analysis = _backend_cost_analysis(executable)
    backend_flops = _non_negative(analysis.get("flops"))
    counted = dot_conv_flops(optimized)
    return Cost(
        flops=float(max(counted, backend_flops or 0.0)),
        counted_flops=counted,
        backend_flops=backend_flops,
        transcendentals=_non_negative(analysis.get("transcendentals")),
        bytes_accessed=_non_negative(analysis.get("bytes accessed")),
    )


def _backend_cost_analysis(executable: Any) -> dict[str, float]:
    try:
        analysis = executable.cost_analysis()
    except Exception:  # some backends do not implement it
        return {}
    if isinstance(analysis, (list, tuple)):  # JAX < 0.4.38 returned one dict per device
        analysis = analysis[0] if analysis else {}
    return dict(analysis or {})


def _non_negative(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if value >= 0 else None


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
