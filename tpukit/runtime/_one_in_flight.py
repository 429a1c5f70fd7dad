"""One multi-device program in flight at a time on simulated CPU devices.

XLA:CPU runs each device's share of a program as tasks of one thread pool, and a
collective (an all-reduce, an all-gather, a collective permute) holds its thread until
every device of the program has joined it. With two such programs in flight at once (a
batch of calls dispatched before the first is awaited, or a call queued behind the
running one), the pool's threads can end up split between them: some wait in the first
program's collective for devices whose tasks sit behind the second's, which wait in
theirs. XLA then waits 40 s and aborts the process (``Termination timeout for
collective permute ... Expected 8 threads to join the rendezvous``), taking the kernel
with it. Whether it happens depends on timing: it is likeliest on few cores, and
certain enough to meet on a 2-core machine with ``--xla_force_host_platform_device_count=8``.

tpukit therefore waits for such a program to finish before it returns from the call
that dispatched it: :func:`one_at_a_time` says whether a program's devices need it, and
:func:`settled` waits. Accelerators keep their queue (a TPU or GPU runs one program
after another on its own stream, and queueing ahead is what keeps it busy); a program
on one CPU device has no collectives to wait in.

    >>> import jax
    >>> one_at_a_time(jax.devices()[:1])
    False
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import jax

T = TypeVar("T")


def one_at_a_time(devices: Iterable[Any]) -> bool:
    """Whether a program on ``devices`` must finish before the next is dispatched:
    it spans more than one CPU device (see the module's docstring)."""
    devices = list(devices)
    return len(devices) > 1 and all(getattr(d, "platform", None) == "cpu" for d in devices)


def devices_of(outputs: Any) -> tuple:
    """The devices of the program that made ``outputs`` (those of its first array):
    every output of a compiled program lives on the program's devices."""
    for leaf in jax.tree.leaves(outputs):
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None:
            return tuple(sharding.device_set)
    return ()


def settled(outputs: T, devices: Iterable[Any] | None = None) -> T:
    """``outputs``, waited for when their program spans several CPU devices.

    ``devices`` are the program's (read from ``outputs`` when not given). Elsewhere
    the outputs come back at once, still being computed, as JAX returns them.
    """
    if one_at_a_time(devices_of(outputs) if devices is None else devices):
        jax.block_until_ready(outputs)
    return outputs
