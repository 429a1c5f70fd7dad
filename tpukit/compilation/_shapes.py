"""Abstract array shapes written in HLO notation, such as ``f32[128,784]``.

XLA prints every array type as ``<dtype>[<dims>]``; tpukit accepts the same
notation wherever a user can give an abstract argument instead of real data,
because only shapes and dtypes matter to a compile.

>>> shape("bf16[8,224,224,3]")
ShapeDtypeStruct(shape=(8, 224, 224, 3), dtype=bfloat16)
>>> format_shape(shape("s32[]"))
's32[]'
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpukit._errors import ShapeSpecError, user_facing

#: HLO dtype names and the NumPy/ml_dtypes names they stand for.
HLO_DTYPES: dict[str, str] = {
    "pred": "bool",
    "s4": "int4",
    "s8": "int8",
    "s16": "int16",
    "s32": "int32",
    "s64": "int64",
    "u4": "uint4",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "c64": "complex64",
    "c128": "complex128",
    "f8e4m3fn": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
}

_NUMPY_TO_HLO = {numpy_name: hlo for hlo, numpy_name in HLO_DTYPES.items()}

#: A shape literal inside a larger piece of text: a dtype name directly followed by
#: ``[...]`` with no nested brackets.
SHAPE_LITERAL = re.compile(
    r"(?<![\w.])(" + "|".join(sorted(HLO_DTYPES, key=len, reverse=True)) + r")\[([^\[\]]*)\]"
)

VALID_SHAPE_FORMS = (
    "Write a dtype followed by dimensions in brackets, e.g. f32[128,784], "
    "bf16[8,224,224,3] or s32[] for a scalar. Valid dtypes: " + ", ".join(HLO_DTYPES) + "."
)


def hlo_dtype_name(dtype: Any) -> str:
    """Return the HLO spelling (``f32``, ``bf16`` ...) of a NumPy or JAX dtype."""
    try:
        name = np.dtype(dtype).name
    except TypeError:  # JAX's extended dtypes, such as PRNG keys (key<fry>)
        return str(dtype)
    return _NUMPY_TO_HLO.get(name, name)


def format_shape(x: Any) -> str:
    """Write an array or ``ShapeDtypeStruct`` in HLO notation, e.g. ``f32[128,784]``."""
    dims = ",".join(str(d) for d in x.shape)
    return f"{hlo_dtype_name(x.dtype)}[{dims}]"


@user_facing
def shape(text: str, evaluate_dim: Callable[[str], Any] | None = None) -> jax.ShapeDtypeStruct:
    """Read one shape written in HLO notation into a ``jax.ShapeDtypeStruct``: ``tpukit.shape``.

    The abstract array a compile takes in place of data; ``tpukit.hlo.parse_shape``
    reads the same notation into an ``HloShape`` (nested tuples, byte counts) instead.

    ``evaluate_dim`` turns a dimension that is not an integer literal (``f32[batch,784]``)
    into an integer; without it only literals are accepted. A layout suffix as XLA
    prints it (``f32[128,784]{1,0}``) is accepted and ignored.

    >>> shape("f32[128, 784]").shape
    (128, 784)
    """
    if not isinstance(text, str):
        raise ShapeSpecError(
            f"A shape is written as a string such as 'f32[128,784]'; got {text!r} "
            f"({type(text).__name__}). " + VALID_SHAPE_FORMS
        )
    stripped = re.sub(r"\{[^{}]*\}$", "", text.strip())
    match = SHAPE_LITERAL.fullmatch(stripped)
    if match is None:
        dtype_part = stripped.split("[", 1)[0]
        if "[" in stripped and dtype_part and dtype_part not in HLO_DTYPES:
            raise ShapeSpecError(
                f"Unknown dtype {dtype_part!r} in shape {text!r}. {VALID_SHAPE_FORMS}"
            )
        raise ShapeSpecError(f"Cannot read {text!r} as a shape. {VALID_SHAPE_FORMS}")
    dtype_name, dims_text = match.groups()
    dims = tuple(_parse_dim(part, text, evaluate_dim) for part in _split_dims(dims_text))
    dtype = jnp.dtype(HLO_DTYPES[dtype_name])
    check_extent(dims, dtype, text)
    warn_if_narrowed(dtype_name, text)
    return jax.ShapeDtypeStruct(dims, dtype)


#: The 64-bit types JAX narrows to 32 bits unless ``jax_enable_x64`` is on.
NARROWED = {"f64": "f32", "s64": "s32", "u64": "u32", "c128": "c64"}


class PrecisionWarning(UserWarning):
    """A shape asks for 64 bits that JAX, with ``jax_enable_x64`` off, gives in 32."""


def warn_if_narrowed(dtype_name: str, text: str) -> None:
    """Say so when a shape's 64-bit type will be compiled in 32 bits (x64 off)."""
    if dtype_name not in NARROWED or jax.config.jax_enable_x64:
        return
    warnings.warn(
        f"{text.strip()} asks for {dtype_name}, but JAX's 64-bit types are off: the program "
        f"is compiled in 32 bits ({dtype_name} -> {NARROWED[dtype_name]}). To compile in 64 "
        "bits, run jax.config.update('jax_enable_x64', True) first (or set "
        "JAX_ENABLE_X64=1 before JAX starts).",
        PrecisionWarning,
        stacklevel=3,
    )


#: The largest array tpukit lets reach XLA, in bytes (8 PiB, more than any pod holds).
#: XLA keeps sizes in signed 64-bit integers and aborts the whole process ("overflow in
#: static extent product") instead of raising when a product of dimensions, or of
#: dimensions and the element size, passes 2**63, even for an array with a zero
#: dimension whose element count is 0. TPU layouts pad the two minor dimensions (up to
#: x8 and x128), so the limit stays a factor of 2**10 below 2**63.
MAX_ARRAY_BYTES = 2**53


def check_extent(dims: tuple[int, ...], dtype: Any, what: str) -> None:
    """Refuse a shape whose size arithmetic would overflow XLA, which aborts the process.

    XLA multiplies the dimensions in several orders (the element count, strides in
    each layout, the byte size), so every partial product must fit, not only the
    element count. The largest of them is the product of the nonzero dimensions
    times the element size: that is what is checked, zero-element shapes included.

    >>> check_extent((1024, 1024), np.float32, "f32[1024,1024]")  # fine: no error
    >>> shape("f32[1099511627776,1099511627776]")  # 2**40 x 2**40
    Traceback (most recent call last):
    tpukit._errors.ShapeSpecError: f32[1099511627776,1099511627776] has 1.2e+24 elements (4.8e+24 bytes); no device holds an array over 9e+15 bytes. Check the dimensions.
    >>> shape("f32[1099511627776,1099511627776,0]")
    Traceback (most recent call last):
    tpukit._errors.ShapeSpecError: f32[1099511627776,1099511627776,0] has no elements, but its other dimensions multiply to 1.2e+24 (4.8e+24 bytes), past the 64-bit sizes XLA computes with; no device holds an array over 9e+15 bytes. Check the dimensions.
    """
    dims = tuple(int(d) for d in dims)
    extent = math.prod(d for d in dims if d != 0)
    try:
        itemsize = max(np.dtype(dtype).itemsize, 1)
    except TypeError:  # JAX's extended dtypes (PRNG keys): a few words per element
        itemsize = 16
    if extent * itemsize <= MAX_ARRAY_BYTES:
        return
    limit = f"no device holds an array over {MAX_ARRAY_BYTES:.2g} bytes. Check the dimensions."
    if 0 in dims:
        raise ShapeSpecError(
            f"{what} has no elements, but its other dimensions multiply to {extent:.2g} "
            f"({extent * itemsize:.2g} bytes), past the 64-bit sizes XLA computes with; {limit}"
        )
    raise ShapeSpecError(
        f"{what} has {extent:.2g} elements ({extent * itemsize:.2g} bytes); {limit}"
    )


def _split_dims(dims_text: str) -> list[str]:
    parts = [part.strip() for part in dims_text.split(",")]
    if parts == [""]:
        return []
    return parts


def _parse_dim(part: str, text: str, evaluate_dim: Callable[[str], Any] | None) -> int:
    if not part:
        raise ShapeSpecError(f"Empty dimension in shape {text!r}. {VALID_SHAPE_FORMS}")
    if part.lstrip("<=").isdigit():
        return int(part.lstrip("<="))
    if evaluate_dim is None:
        raise ShapeSpecError(
            f"Dimension {part!r} in shape {text!r} is not a whole number. {VALID_SHAPE_FORMS}"
        )
    value = evaluate_dim(part)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ShapeSpecError(
            f"Dimension {part!r} in shape {text!r} evaluates to {value!r}; "
            "dimensions must be non-negative whole numbers."
        )
    return int(value)
