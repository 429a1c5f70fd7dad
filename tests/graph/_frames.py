"""Stack-frame tables for the diff tests' cuts of the v6e pairs, written as XLA prints them.

The pairs under ``benchmarks/hlo_pairs/v6e`` were dumped by ``scripts/dump_hlo.py``; a cut
keeps the frames its ops name, and the diff compares ops by the place of their frame. A
test says only where each frame is; `frame_tables` writes the ``FileNames``,
``FunctionNames``, ``FileLocations`` and ``StackFrames`` tables of it:

    >>> print(frame_tables(("fft_complex", 139, 8, 22)))  # doctest: +NORMALIZE_WHITESPACE
    FileNames
    1 "scripts/dump_hlo.py"
    FunctionNames
    1 "fft_complex"
    FileLocations
    1 {file_name_id=1 function_name_id=1 line=139 end_line=139 column=8 end_column=22}
    StackFrames
    1 {file_location_id=1 parent_frame_id=1}
"""

FILE = "scripts/dump_hlo.py"


def frame_tables(*frames: tuple[str, int, int, int], caller: int = 0) -> str:
    """The four tables, a blank line before each: frame ``k`` (from 1) is ``frames[k - 1]``,
    ``(function, line, column, end_column)`` in `FILE`; each frame but ``caller`` itself
    is called from frame ``caller`` (0: frames called from none)."""
    functions = list(dict.fromkeys(function for function, *_ in frames))
    lines = ["", "FileNames", f'1 "{FILE}"', "", "FunctionNames"]
    lines += [f'{k} "{name}"' for k, name in enumerate(functions, 1)]
    lines += ["", "FileLocations"]
    for k, (function, line, column, end) in enumerate(frames, 1):
        lines.append(
            f"{k} {{file_name_id=1 function_name_id={functions.index(function) + 1} "
            f"line={line} end_line={line} column={column} end_column={end}}}"
        )
    lines += ["", "StackFrames"]
    for k in range(1, len(frames) + 1):
        # parent_frame_id: the caller's id + 1, 1 for none (as `frame_places` reads it)
        parent = caller + 1 if caller and k != caller else 1
        lines.append(f"{k} {{file_location_id={k} parent_frame_id={parent}}}")
    return "\n".join(lines) + "\n"


# The lowered fft_complex's first computation, the jnp.fft call's body.
_FFT_1 = """
fft.1 {
  Arg_0.1 = f32[256]{0} parameter(0)
  convert_element_type.1 = c64[256]{0} convert(Arg_0.1), metadata={op_name="convert_element_type"}
  ROOT fft.1 = c64[256]{0} fft(convert_element_type.1), fft_type=FFT, fft_length={256}, metadata={op_name="fft"}
}
"""


def fft_complex_head(stage: str) -> str:
    """The start of a cut of the v6e pair ``fft_complex`` for ``stage`` (``"lowered"``,
    ``"optimized"``): its module line and frame tables, and of the lowered module its
    first computation (``fft.1``); the cut goes on with its own computations.

    The seven frames are those of its ``before.hlo``; the optimized module numbers line
    141's first two apart (its 5 is the lowered 6, column 23, ``.real + .imag``; its 6 the
    lowered 5, column 11, ``jnp.abs``). Frames 3 and 4 differ only in their columns
    (``jnp.fft.irfft(jnp.fft.rfft(y))``: two calls on line 140)."""
    lowered = stage == "lowered"
    module = "HloModule jit_fft_complex" + ("" if lowered else ", is_scheduled=true")
    return module + "\n" + _frames(lowered) + (_FFT_1 if lowered else "")


def _frames(lowered: bool) -> str:
    five, six = ((11, 21), (23, 34)) if lowered else ((23, 34), (11, 21))
    return frame_tables(
        ("<module>", 209, 18, 56),
        ("fft_complex", 139, 8, 22),
        ("fft_complex", 140, 22, 46),
        ("fft_complex", 140, 8, 56),
        ("fft_complex", 141, *five),
        ("fft_complex", 141, *six),
        ("fft_complex", 141, 37, 48),
        caller=1,
    )
