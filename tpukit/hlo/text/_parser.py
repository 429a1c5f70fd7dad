"""Turn HLO text into an `HloModule`.

The parser reads the text JAX prints at both stages -- ``lowered.as_text(dialect="hlo")``
and ``compiled.as_text()`` -- one line at a time. It understands the module
header, computations (``ENTRY``, fused, while bodies, branches, reducers), the
stack-frame tables newer XLA prints (``FileNames``, ``FunctionNames``,
``FileLocations``, ``StackFrames``) and every instruction line. Whatever it does
not recognise is kept as a raw string (an attribute, or ``HloModule.unparsed``):
odd text never raises.

    >>> x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
    >>> module = parse_hlo(jax.jit(lambda x, w: jnp.tanh(x @ w)).lower(x, w).compile().as_text())
    >>> str(module.entry.root.shape), module.entry.parameters[0].name
    ('f32[8,4]{1,0}', 'x.1')

Speed and memory (a 400,000-instruction dump is what a large model gives): one regex,
`_ROW`, cuts the text into lines and reads the common instruction line (name, shape --
an array or a tuple of arrays --, opcode, operands as ``[shape ]%name`` pieces -- the
first two names captured -- and the rest) in the same match; ``findall`` over a megabyte
of text at a time gives one tuple per line, and `_read_rows` makes each common line's
record from its tuple with no further regex (more operand names by ``str.split``; the
metadata of each distinct rest of a line found once, XLA's own metadata text read by one
regex, `_XLA_METADATA`, and each distinct text parsed once; a computation's header,
``%name (...) -> ... {``, is matched in place). Every other line -- other headers,
closing braces, continuation lines, other comments, odd spacing -- goes through
`_Reader.line`, the line-by-line reader, which is also what reads text with line breaks
other than "\\n"; both read any text the same way (``tests/test_hlo_parser_rows.py``). A
record keeps its place in the module's text rather than a copy of its line; an
instruction's attributes are split only when someone asks (`HloInstruction.attributes`),
the parser itself reading just the called computations and the metadata, once per
distinct rest of a line (`_ending`: XLA's metadata after plain pieces and a fusion's or
reduce's one call are read without a split); a parameter keeps its number's text (every
view sorts parameters by it); equal metadata of one module, and its fields' keys and
short values, are stored once (names are not: a table of 400,000 names costs more time
than its strings cost memory); the garbage collector pauses while the objects pile up,
and the objects made are then moved to its oldest generation unscanned (`paused_gc`).
Equal text parsed again while its module is alive is not parsed again
(`_parsed.PARSED`).
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterator

from tpukit._errors import HloTextError, WrongTypeError
from tpukit.hlo.text._fast_rows import _read_rows
from tpukit.hlo.text._line_reader import _Reader
from tpukit.hlo.text._model import HloInstruction, HloModule
from tpukit.hlo.text._parsed import PARSED

_MODULE_LINE = re.compile(r"^[ \t]*HloModule[ \t]+([^\s,]+)", re.MULTILINE)


def parse_hlo(text: str) -> HloModule:
    """Parse HLO text into an `HloModule`.

    Args:
      text: what ``jax.jit(f).lower(*args).as_text(dialect="hlo")`` or
        ``jax.jit(f).lower(*args).compile().as_text()`` returns (or any HLO dump).

    Returns:
      The module, with its computations in file order. Equal text parsed again while
      the first module is alive gives that module (`tpukit.hlo.text._parsed`): treat it as
      read-only.

    Raises:
      ValueError: when the text has neither an ``HloModule`` header nor a
        computation, i.e. it is not HLO (StableHLO/MLIR text, for example).

    Example:
        >>> module = parse_hlo(jax.jit(jnp.sin).lower(1.0).as_text(dialect="hlo"))
        >>> [i.opcode for i in module.entry]
        ['parameter', 'sine']
    """
    if not isinstance(text, str):
        raise WrongTypeError(
            f"parse_hlo expects the HLO text as a str, got {type(text).__name__}; "
            "pass e.g. jax.jit(f).lower(x).as_text(dialect='hlo')."
        )
    module = PARSED.get(text)
    if module is not None:  # parsed already, and someone still holds it (see _parsed)
        return module
    # One ``HloModule`` word at most: no need to look for more module lines (4.6 MB: 20 ms).
    names = module_names(text) if text.count("HloModule") > 1 else []
    if len(names) > 1:
        raise HloTextError(
            f"This text holds {len(names)} HLO modules ({', '.join(names[:6])}"
            f"{', ...' if len(names) > 6 else ''}); parse_hlo reads one. Pick one with "
            f"tpukit.hlo.open(text, module={names[0]!r}), or split the text at its "
            "'HloModule' lines."
        )
    with paused_gc(keep=True):
        module, callers = _parse(text)
    check_complete(module, callers)
    PARSED.put(text, module)
    return module


def module_names(text: str) -> list[str]:
    """The names on the ``HloModule`` lines of ``text``, in order (a dump may hold several).

    >>> module_names("HloModule a\\nENTRY e {...}\\nHloModule b, is_scheduled=true\\n...")
    ['a', 'b']
    """
    return [_MODULE_LINE.match(text, at).group(1) for at in _module_starts(text)]  # type: ignore[union-attr]


def split_modules(text: str) -> list[tuple[str, str]]:
    """``(name, text)`` of each module in text holding several ``HloModule``s, in order."""
    starts = _module_starts(text)
    if len(starts) <= 1:
        return [(module_names(text)[0] if starts else "", text)]
    bounds = zip(starts, [*starts[1:], len(text)])
    return [(_MODULE_LINE.match(text, a).group(1), text[a:b]) for a, b in bounds]  # type: ignore[union-attr]


def _module_starts(text: str) -> list[int]:
    """Where the lines `_MODULE_LINE` matches start: the lines where the word
    ``HloModule`` comes after nothing but spaces. (Found by ``str.find``: the regex tries
    every character of the text, 1 s on 50 MB, as its lines may start anywhere.)"""
    starts = []
    at = text.find("HloModule")
    while at >= 0:
        line = text.rfind("\n", 0, at) + 1
        if not text[line:at].strip(" \t") and _MODULE_LINE.match(text, line):
            starts.append(line)
        at = text.find("HloModule", at + 9)
    return starts


def check_complete(module: HloModule, callers: list[HloInstruction] | None = None) -> None:
    """Refuse a module that is cut short or misses a computation it calls.

    A dump cut while it was written (a full disk, a killed job, a partial copy) still
    parses line by line; its figures would be those of a smaller program. Raises
    `HloTextError` naming what is missing: the ENTRY computation, or a computation
    that an instruction calls. ``callers``, when given, are the module's instructions
    that call computations, in its order (the parser's list: no walk over every record).
    """
    if module.computations and module.entry_name not in module.computations:
        raise HloTextError(
            f"HLO module {module.name or '(unnamed)'!r} has no ENTRY computation (its "
            f"{len(module.computations)} computation(s) end with "
            f"{list(module.computations)[-1]!r}): the text looks cut short. Open the "
            "whole file XLA wrote (XLA marks its last computation ENTRY), or mark the "
            "program's computation 'ENTRY' in hand-written HLO."
        )
    if callers is None:
        callers = [i for c in module.computations.values() for i in c.instructions]
    for instr in callers:
        for ref in instr.called_computations:
            if ref.name not in module.computations:
                raise HloTextError(
                    f"Instruction {instr.name!r} in {instr.computation!r} calls computation "
                    f"{ref.name!r}, which module {module.name or '(unnamed)'!r} does not "
                    "hold: the text is incomplete (cut short or edited). Open the whole "
                    "module XLA wrote."
                )


@contextlib.contextmanager
def paused_gc(keep: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector: parsing makes hundreds of thousands of objects
    and no cycles, and collections triggered by them would scan the whole heap again
    and again (a third of the parse time on a 20k-instruction module).

    With ``keep`` (what was made is kept: a parsed module), the young objects are moved
    to the oldest generation when the block ends (``gc.freeze``, then ``gc.unfreeze``:
    no scan). Otherwise the first allocation after it would scan them all as young
    objects (0.2 s for 400,000 instructions) and again as middle-aged ones, only to
    find them alive. They are scanned at the next full collection, as old objects are;
    so are any other young objects of the process at that moment (cyclic garbage among
    them is freed then rather than at the next young collection)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


def _parse(text: str) -> tuple[HloModule, list[HloInstruction] | None]:
    """The module of ``text``, and its instructions that call computations (None when
    only the module can tell: see `_Reader.known_callers`)."""
    reader = _Reader(text)
    if _rows_apply(text):
        _read_rows(reader, text)
    else:  # line breaks other than "\n": read line by line, as `str.splitlines` splits
        end = 0
        for line in text.splitlines(True):
            start, end = end, end + len(line)
            reader.line(line, start)
    return reader.finish(), reader.known_callers()


def _rows_apply(text: str) -> bool:
    """Whether `_ROW` cuts ``text`` into the lines `str.splitlines` gives: "\\n" is its
    only line break (a plain ``in`` per character: a regex class search is 20x slower)."""
    breaks = "\r\x0b\x0c\x1c\x1d\x1e" + ("" if text.isascii() else "\x85\u2028\u2029")
    return not any(char in text for char in breaks)
