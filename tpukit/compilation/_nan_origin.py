"""What ``find_nan`` found: the first operation that made a NaN or an infinity, in words.

A :class:`NanOrigin` is a plain record: the operation (a JAX primitive such as
``log``), the user's source line, the NNX layer, the part of a training step
(forward, loss, backward, optimizer update), and the ranges of the operation's
inputs (:class:`ValueRange`). When the first bad value came with the data, the record
names the argument and its rows instead. Its ``__repr__`` and ``_repr_html_`` render
one ``tpukit.display.Report``; :meth:`NanOrigin.summary` is the one line an error
message carries.

>>> r = ValueRange.of("x", np.array([0.0, 2.0, -1.0], np.float32))
>>> r.text()
'x f32[3]: min -1, max 2; 1 zero, 1 negative'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpukit.compilation._shapes import hlo_dtype_name
from tpukit.display import Line, Report, fact_table

_PARTS = {
    "forward": "the forward pass",
    "loss": "the loss",
    "backward": "the backward pass",
    "optimizer update": "the optimizer update",
}


@dataclass(frozen=True)
class ValueRange:
    """What an array held: its shape, the range of its finite values, and how many of
    its entries are zeros, negatives, infinities and NaNs."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    min: float | None
    max: float | None
    zeros: int
    negatives: int
    infinities: int
    nans: int

    @classmethod
    def of(cls, name: str, value: Any) -> ValueRange:
        """The range of ``value`` (an array or a number), read on the host."""
        array = np.asarray(value)
        dtype = array.dtype
        if dtype.kind not in "fciub":  # bfloat16 and the float8s are numpy 'V' kinds
            array = array.astype(np.float32)
        if array.dtype.kind == "c":
            array = np.abs(array)
        finite = array[np.isfinite(array)] if array.dtype.kind in "fc" else array.ravel()
        nans = int(np.isnan(array).sum()) if array.dtype.kind == "f" else 0
        infinities = int(np.isinf(array).sum()) if array.dtype.kind == "f" else 0
        return cls(
            name=name,
            shape=tuple(array.shape),
            dtype=hlo_dtype_name(dtype),
            min=float(finite.min()) if finite.size else None,
            max=float(finite.max()) if finite.size else None,
            zeros=int((array == 0).sum()),
            negatives=int((array < 0).sum()),
            infinities=infinities,
            nans=nans,
        )

    @property
    def size(self) -> int:
        """How many entries the array has."""
        return int(np.prod(self.shape, dtype=np.int64))

    def counts(self) -> str:
        """``'1 zero, 1 negative'``: the counts that are not zero."""
        parts = [
            (self.zeros, "zero", "zeros"),
            (self.negatives, "negative", "negatives"),
            (self.infinities, "infinity", "infinities"),
            (self.nans, "NaN", "NaNs"),
        ]
        return ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in parts if n)

    def text(self) -> str:
        """One line: name, shape, range of the finite values and the counts."""
        shape = f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"
        if self.min is None:
            span = "no finite value"
        elif self.min == self.max:
            span = f"all {self.min:.4g}" if not self.counts() else f"finite values {self.min:.4g}"
        else:
            span = f"min {self.min:.4g}, max {self.max:.4g}"
        counts = self.counts()
        return f"{self.name} {shape}: {span}" + (f"; {counts}" if counts else "")


@dataclass(frozen=True)
class NanOrigin:
    """Where a function's first NaN or infinity was made, as :func:`tpukit.find_nan` found it.

    ``kind`` is ``"operation"`` (an operation whose inputs held no such value made one),
    ``"data"`` (an argument already held it: ``argument`` and ``rows`` say where) or
    ``"constant"`` (a constant of the program, such as a ``-inf`` mask, reached the
    result). ``operation`` is the JAX primitive (``log``, ``div``, ``sqrt``, ``exp``...)
    and ``function`` the library function it ran in (``softmax``), if any. ``source`` is
    the user's line (``model.py:12``, ``In [3], line 4``) and ``code`` its text; ``layer``
    and ``layer_class`` the NNX module (``layers[2]``, ``Linear``); ``part`` one of
    ``"forward"``, ``"loss"``, ``"backward"``, ``"optimizer update"``; for the backward
    pass, ``gradient_of`` names the forward operation whose gradient it computes.
    ``inputs`` are the ranges of the operation's inputs, ``output`` that of its result;
    ``made`` is ``"NaN"``, ``"inf"``, ``"-inf"`` or ``"inf and NaN"``. When the
    operation made an infinity and a later one turned it into NaN (``inf - inf``),
    ``nan_at`` says where.
    """

    kind: str
    made: str
    operation: str = ""
    function: str = ""
    source: str = ""
    code: str = ""
    layer: str | None = None
    layer_class: str | None = None
    part: str | None = None
    gradient_of: str | None = None
    inputs: tuple[ValueRange, ...] = ()
    output: ValueRange | None = None
    argument: str | None = None
    rows: tuple[int, ...] = ()
    nan_at: str = ""
    name_stack: str = ""

    @property
    def where(self) -> str:
        """``'layers[2] (Linear)'``, or ``''`` outside any layer."""
        if not self.layer:
            return ""
        return f"{self.layer} ({self.layer_class})" if self.layer_class else self.layer

    def summary(self) -> str:
        """The finding in one line, as an error message gives it."""
        if self.kind == "data":
            rows = _rows_text(self.rows)
            return f"the data: {self.argument} already held {self.made}" + (
                f" ({rows})" if rows else ""
            )
        called = self.function if self.function not in ("", self.operation) else ""
        what = self.operation + (f" in {called}" if called else "")
        if self.kind == "constant":
            what = "a constant of the program"
        text = f"{what} made {self.made}"
        if self.kind == "operation" and self.inputs:
            text += " from finite inputs" if self._finite_inputs() else ""
        if self.part == "backward" and self.gradient_of:
            text += f" in the backward pass (the gradient of {self.gradient_of})"
        elif self.part:
            text += f" in {_PARTS.get(self.part, self.part)}"
        if self.where:
            text += f", layer {self.where}"
        if self.source:
            text += f", at {self.source}" + (f": {self.code}" if self.code else "")
        if self.nan_at:
            text += f"; NaN followed at {self.nan_at}"
        return text

    def _finite_inputs(self) -> bool:
        return all(not (r.nans or r.infinities) for r in self.inputs)

    def _report(self) -> Report:
        facts: list[tuple[str, str]] = []
        if self.kind == "data":
            facts.append(("argument", str(self.argument)))
            if self.rows:
                facts.append(("rows", _rows_text(self.rows, limit=20)))
        else:
            called = self.function if self.function not in ("", self.operation) else ""
            op = self.operation + (f" (in {called})" if called else "")
            facts.append(("operation", op or self.kind))
            facts.append(("made", self.made))
            if self.source:
                facts.append(("line", self.source + (f": {self.code}" if self.code else "")))
            if self.where:
                facts.append(("layer", self.where))
            if self.part:
                part = _PARTS.get(self.part, self.part)
                if self.part == "backward" and self.gradient_of:
                    part += f" (the gradient of {self.gradient_of})"
                facts.append(("part", part))
            facts += [("input", r.text()) for r in self.inputs]
            if self.output is not None:
                facts.append(("output", self.output.text()))
            if self.nan_at:
                facts.append(("NaN at", self.nan_at))
        title = "First non-finite value: " + (
            "in the data" if self.kind == "data" else (self.operation or self.kind)
        )
        return Report("tpukit-nan", title, [Line(self.summary()), fact_table(facts)])

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report().html()


def _rows_text(rows: Sequence[int], limit: int = 8) -> str:
    if not rows:
        return ""
    shown = ", ".join(str(r) for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"row{'s' if len(rows) > 1 else ''} {shown}{more}"
