"""A small, walkable model of an HLO module: shapes, instructions, computations.

`parse_hlo` (in `_parser.py`) builds these objects from the text that
``jax.jit(f).lower(*args).as_text(dialect="hlo")`` or ``.compile().as_text()``
prints (shapes are in ``_hlo_shape``). They keep what a reader of HLO looks at -- names, opcodes, shapes,
operands, the computations an instruction calls, and where in the user's source
it came from -- and keep every other attribute as its raw string, so nothing
in the text is lost.

    >>> from tpukit.hlo import parse_hlo
    >>> module = parse_hlo('''
    ... HloModule jit_f
    ... fused_computation {
    ...   param_0 = f32[8,16]{1,0} parameter(0)
    ...   param_1 = f32[16,4]{1,0} parameter(1)
    ...   ROOT dot_general.0 = f32[8,4]{1,0} dot(param_0, param_1), lhs_contracting_dims={1},
    ...     rhs_contracting_dims={0}, metadata={source_file="model.py" source_line=7}
    ... }
    ... ENTRY main {
    ...   x.1 = f32[8,16]{1,0} parameter(0)
    ...   w.1 = f32[16,4]{1,0} parameter(1)
    ...   dot_fusion = f32[8,4]{1,0} fusion(x.1, w.1), kind=kOutput, calls=fused_computation
    ...   ROOT tanh.1 = f32[8,4]{1,0} tanh(dot_fusion)
    ... }''')
    >>> for instr in module.entry:
    ...     print(instr.name, instr.opcode, instr.shape, instr.operands)
    x.1 parameter f32[8,16]{1,0} []
    w.1 parameter f32[16,4]{1,0} []
    dot_fusion fusion f32[8,4]{1,0} ['x.1', 'w.1']
    tanh.1 tanh f32[8,4]{1,0} ['dot_fusion']
    >>> module.instruction("dot_general.0").source_location
    'model.py:7'
    >>> module.edges("fused_computation")[0]
    HloEdge(source='param_0', target='dot_general.0', nbytes=512)

The lowered stage carries source lines only when asked:
``lowered.as_text(dialect="hlo", debug_info=True)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tpukit._errors import UnknownNameError
from tpukit.hlo.text._attributes import split_attributes
from tpukit.hlo.text._hlo_shape import DTYPE_BITS as DTYPE_BITS
from tpukit.hlo.text._hlo_shape import UNREADABLE as UNREADABLE
from tpukit.hlo.text._hlo_shape import HloShape as HloShape
from tpukit.hlo.text._hlo_shape import element_bits as element_bits
from tpukit.hlo.text._sources import describe_location


class HloSourceFrame(NamedTuple):
    """One frame of user source: file, line and function (``""`` / 0 when unknown)."""

    file: str
    line: int
    function: str = ""


@dataclass(slots=True)
class HloMetadata:
    """The ``metadata={...}`` of an instruction: which JAX op and source line made it.

    ``source_file``/``source_line`` come from the metadata itself or, in newer
    XLA, from the module's stack-frame tables via ``stack_frame_id``: then
    ``stack`` is the whole call stack (innermost first) and the source is its
    innermost frame outside installed libraries, i.e. the user's own line rather
    than a line inside Flax or JAX.
    ``fields`` holds every key of the metadata as a raw (unquoted) string.
    """

    op_name: str = ""
    op_type: str = ""
    source_file: str = ""
    source_line: int = 0
    stack_frame_id: int = 0
    fields: dict[str, str] = field(default_factory=dict)
    stack: tuple[HloSourceFrame, ...] = ()


class ComputationRef(NamedTuple):
    """A computation an instruction calls, and the role it plays there.

    Roles are the attribute names: ``calls`` (fusion, custom-call, async-start),
    ``to_apply`` (call, reduce, sort, map, all-reduce, ...), ``body``,
    ``condition``, ``branch`` (conditional), ``select``/``scatter``
    (select-and-scatter) and ``called_computations`` (custom-call).
    """

    name: str
    role: str


class HloEdge(NamedTuple):
    """A data edge ``source -> target`` inside one computation, with the bytes it carries."""

    source: str
    target: str
    nbytes: int


class HloInstruction:
    """One line of HLO: ``%dot.3 = f32[8,4]{1,0} dot(%x, %w), lhs_contracting_dims={1}``.

    ``operands`` are instruction names (without ``%``) in the same computation.
    ``operand_text`` is the raw text between the opcode's parentheses -- the
    literal of a ``constant`` or the number of a ``parameter``. ``attributes``
    holds every ``key=value`` after the operands as raw strings (including the
    ones also parsed into ``called_computations`` and ``metadata``); text that
    could not be split into ``key=value`` lands under the key ``""``.

        >>> instr = module.instruction("dot_general.0")
        >>> instr.opcode, instr.operands, instr.attributes["lhs_contracting_dims"]
        ('dot', ['param_0', 'param_1'], '{1}')
        >>> instr.metadata.source_file, instr.source_location
        ('model.py', 'model.py:7')

    A module holds hundreds of thousands of these, so the record is lean: fixed slots,
    ``text`` a place in the module's text (which it keeps alive) rather than a copy,
    ``operand_text`` read from ``text`` when asked, and ``attributes`` split out of
    ``text`` on first use (the parser reads the called
    computations and the metadata when it builds the record; most attributes of most
    instructions are never asked for). Instructions with the same ``metadata={...}``
    text share one `HloMetadata`, and the parser's records with no operands or no called
    computations share one empty list: a parsed module is read-only.
    """

    __slots__ = (
        "name", "opcode", "shape", "operands", "_attributes", "called_computations",
        "metadata", "is_root", "_text", "_at", "_end", "_operand_text", "computation",
        "_rest_at",
    )  # fmt: skip
    #: Records whose text or attributes changed after they were made, of every module (a
    #: lazy split too): `_parsed_rows.ParsedRows` holds the parser's rows unchanged while
    #: this stays as it was when it was filled.
    _edits = 0

    def __init__(
        self,
        name: str,
        opcode: str,
        shape: HloShape,
        operands: list[str] | None = None,
        attributes: dict[str, str] | None = None,
        called_computations: list[ComputationRef] | None = None,
        metadata: HloMetadata | None = None,
        is_root: bool = False,
        text: str = "",
        operand_text: str | int = "",
        computation: str = "",
        *,
        rest_at: int = -1,
        source: str | None = None,
        at: int = 0,
    ) -> None:
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[str] = [] if operands is None else operands
        # None until asked for: then split from ``text[rest_at:]`` (see `attributes`).
        self._attributes = attributes if attributes is not None or rest_at < 0 else None
        if self._attributes is None and rest_at < 0:
            self._attributes = {}
        self._rest_at = rest_at
        self.called_computations: list[ComputationRef] = (
            [] if called_computations is None else called_computations
        )
        self.metadata: HloMetadata = HloMetadata() if metadata is None else metadata
        self.is_root = is_root
        if source is None:
            self._text, self._at, self._end = text, -1, 0
        else:  # ``text`` is ``source[at:at + len(text)]``: kept as that place, not a copy
            self._text, self._at, self._end = source, at, at + len(text)
        # The text, or where it starts in ``text`` (it then ends at the next ``)``).
        self._operand_text = operand_text
        self.computation = computation

    @property
    def text(self) -> str:
        """The instruction's HLO line, as written (continuation lines joined by spaces)."""
        at = self._at
        if at < 0:
            return self._text
        end = self._end
        if end < 0:  # the line ends at its line break (the parser's rows: see `_read_rows`);
            end = self._text.find("\n", at)  # found each time: an int kept each is 28 bytes
        return self._text[at:end]

    @text.setter
    def text(self, value: str) -> None:
        self._text, self._at, self._end = value, -1, 0
        HloInstruction._edits += 1

    @property
    def operand_text(self) -> str:
        """The raw text between the opcode's parentheses (``"3"`` for ``parameter(3)``)."""
        found = self._operand_text
        if found.__class__ is int:  # read from the line when asked: one string fewer each
            text = self.text
            return text[found : text.find(")", found)]  # type: ignore[index]
        return found  # type: ignore[return-value]

    @operand_text.setter
    def operand_text(self, value: str) -> None:
        self._operand_text = value

    @property
    def attributes(self) -> dict[str, str]:
        """Every ``key=value`` after the operands, as raw strings (split on first use)."""
        if self._attributes is None:
            self._attributes = split_attributes(self.text[self._rest_at :].strip())
            HloInstruction._edits += 1
        return self._attributes

    @attributes.setter
    def attributes(self, value: dict[str, str]) -> None:
        self._attributes = value
        HloInstruction._edits += 1

    def attribute(self, key: str, default: str = "") -> str:
        """``attributes.get(key, default)``, without keeping the split when `attributes`
        was not asked for yet: a large module's dots are each asked their dimension
        numbers once (their FLOPs are kept), and every dot's whole dict, metadata
        included, would stay with the module (14 MB at 400,000 instructions)."""
        found = self._attributes
        if found is None:
            found = split_attributes(self.text[self._rest_at :].strip())
        return found.get(key, default)

    def _fields(self) -> tuple:
        return (
            self.name, self.opcode, self.shape, self.operands, self.attributes,
            self.called_computations, self.metadata, self.is_root, self.text,
            self.operand_text, self.computation,
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return (
            f"HloInstruction(name={self.name!r}, opcode={self.opcode!r}, shape={self.shape}, "
            f"operands={self.operands!r})"
        )

    @property
    def source_location(self) -> str:
        """Where the op came from, short: ``"file.py:12"`` (the file's base name), or
        ``"In [7], line 3"`` for a notebook cell; ``""`` when the HLO has no source info."""
        return describe_location(self.metadata.source_file, self.metadata.source_line)

    @property
    def source_path(self) -> str:
        """The full ``"/path/to/file.py:12"`` behind `source_location` (``""`` when none)."""
        meta = self.metadata
        if not meta.source_file:
            return ""
        return f"{meta.source_file}:{meta.source_line}" if meta.source_line else meta.source_file

    @property
    def name_scope(self) -> str:
        """The op_name without its last component: ``jit(f)/dense`` for ``jit(f)/dense/dot``."""
        op_name = self.metadata.op_name
        return op_name.rsplit("/", 1)[0] if "/" in op_name else ""

    @property
    def parameter_number(self) -> int | None:
        """The index of a ``parameter(3)``; None for other opcodes."""
        if self.opcode != "parameter":
            return None
        try:
            return int(self.operand_text)
        except ValueError:
            return None

    @property
    def fusion_kind(self) -> str:
        """``kLoop``/``kInput``/``kOutput``/``kCustom`` for a fusion, else ``""``."""
        if self.opcode != "fusion":
            return ""
        if self._attributes is None:  # XLA writes it first: read it without the split
            text, at = self.text, self._rest_at
            if text.startswith(", kind=", at):
                end = text.find(",", at + 7)
                return text[at + 7 : end if end >= 0 else len(text)].strip()
        return self.attributes.get("kind", "")

    @property
    def custom_call_target(self) -> str:
        """The unquoted ``custom_call_target`` of a custom-call, else ``""``."""
        return self.attributes.get("custom_call_target", "").strip('"')


class HloComputation:
    """A named list of instructions; the last one marked ``ROOT`` is its result.

    ``kind`` says how the module uses it: ``entry``, ``fusion``, ``while_body``,
    ``while_condition``, ``branch`` (of a conditional), ``applied`` (a scalar
    reducer or comparator given by ``to_apply`` to reduce, sort, scatter,
    all-reduce, map, ...), ``called`` (by ``call`` or ``custom-call``), ``async``
    (wrapped by an ``*-start``) or ``unused`` (nothing calls it).

        >>> comp = module.computations["fused_computation"]
        >>> comp.kind, comp.root.opcode, comp["param_0"].shape
        ('fusion', 'dot', HloShape(f32[8,16]{1,0}))
    """

    def __init__(
        self,
        name: str,
        instructions: list[HloInstruction] | None = None,
        *,
        is_entry: bool = False,
        kind: str = "unused",
        signature: str = "",
    ) -> None:
        self.name = name
        self.instructions: list[HloInstruction] = instructions or []
        self.is_entry = is_entry
        self.kind = "entry" if is_entry else kind
        self.signature = signature
        self._by_name: dict[str, HloInstruction] | None = None
        self._parameters: tuple[int, list[HloInstruction]] | None = None

    @property
    def root(self) -> HloInstruction | None:
        """The ``ROOT`` instruction (the last one when none is marked)."""
        for instr in reversed(self.instructions):
            if instr.is_root:
                return instr
        return self.instructions[-1] if self.instructions else None

    @property
    def parameters(self) -> list[HloInstruction]:
        """The ``parameter`` instructions, ordered by parameter number."""
        known = self._parameters  # asked for by every view: sorted once (again if edited)
        if known is None or known[0] != len(self.instructions):
            params = [i for i in self.instructions if i.opcode == "parameter"]
            if len(params) > 1:
                params.sort(key=parameter_order)
            known = self._parameters = (len(self.instructions), params)
        return list(known[1])

    def get(self, name: str) -> HloInstruction | None:
        """The instruction called ``name`` (with or without ``%``), or None."""
        by_name = self._by_name
        if by_name is None or len(by_name) != len(self.instructions):
            by_name = self._by_name = {i.name: i for i in self.instructions}
        found = by_name.get(name)  # asked for every operand of every instruction: no % first
        return found if found is not None or name[:1] != "%" else by_name.get(name.lstrip("%"))

    def __getitem__(self, name: str) -> HloInstruction:
        instr = self.get(name)
        if instr is None:
            raise UnknownNameError(
                f"No instruction {name!r} in computation {self.name!r}; "
                f"it has {len(self.instructions)} instructions, e.g. "
                f"{[i.name for i in self.instructions[:3]]}."
            )
        return instr

    def __iter__(self) -> Iterator[HloInstruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def edges(self) -> list[HloEdge]:
        """Every ``operand -> user`` edge, with the bytes of the operand's value.

        An operand used twice by one instruction gives two edges; an operand
        name that is not in this computation is skipped.
        """
        edges = []
        for instr in self.instructions:
            for operand in instr.operands:
                source = self.get(operand)
                if source is not None:
                    edges.append(HloEdge(source.name, instr.name, source.shape.nbytes))
        return edges

    def __repr__(self) -> str:
        return (
            f"HloComputation({self.name!r}, kind={self.kind!r}, "
            f"{len(self.instructions)} instructions)"
        )


def parameter_order(instr: HloInstruction) -> int:
    """A parameter's number, 0 when it has none: `HloComputation.parameters`' order. (Its
    number's text as the parser keeps it, read without the two properties when plain.)"""
    text = instr._operand_text
    if text.__class__ is str and text.isdecimal():  # type: ignore[union-attr]
        return int(text)  # type: ignore[arg-type]
    return instr.parameter_number or 0


@dataclass
class HloModule:
    """A parsed HLO module: its computations in file order and the entry one.

        >>> module.name, module.entry.name, len(module.computations)  # the module above
        ('jit_f', 'main', 2)
        >>> [i.name for i in module.callers("fused_computation")]
        ['dot_fusion']

    ``attributes`` holds the header's ``key=value`` pairs as raw strings
    (``entry_computation_layout``, ``is_scheduled``, ...). ``stack_frames`` maps
    a ``stack_frame_id`` to its call stack, innermost frame first, and ``frame_places`` to
    where each of its frames is, columns included (`_module_links.frame_places`: how two
    modules' frames are compared). ``unparsed`` keeps the
    lines outside computations that the parser did not understand.
    """

    name: str
    computations: dict[str, HloComputation] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    entry_name: str = ""
    stack_frames: dict[int, tuple[HloSourceFrame, ...]] = field(default_factory=dict)
    frame_places: dict[int, tuple[tuple, ...]] = field(default_factory=dict)
    unparsed: list[str] = field(default_factory=list)
    _callers: dict[str, list[HloInstruction]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # FLOPs of each computation by name, filled by `tpukit.hlo.analysis._cost` as it counts them.
    _flops: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    # Other analyses computed once per module (`tpukit.hlo.analysis._executed`: tallies).
    _analysis: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _reachable: set[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        count = sum(len(c) for c in self.computations.values())
        return (
            f"HloModule({self.name!r}, entry={self.entry_name!r}, "
            f"{len(self.computations)} computations, {count} instructions)"
        )

    @property
    def entry(self) -> HloComputation:
        """The ``ENTRY`` computation (the last one when none is marked)."""
        if self.entry_name in self.computations:
            return self.computations[self.entry_name]
        return list(self.computations.values())[-1]

    def reachable(self) -> set[str]:
        """Names of the computations ENTRY reaches through any call (ENTRY included).

        A dump can hold computations nothing calls any more; they are no part of the
        program and are left out of its figures.
        """
        if self._reachable is None:
            found = {self.entry.name} if self.computations else set()
            stack = list(found)
            while stack:
                for instr in self.computations[stack.pop()].instructions:
                    for ref in instr.called_computations:
                        if ref.name in self.computations and ref.name not in found:
                            found.add(ref.name)
                            stack.append(ref.name)
            self._reachable = found
        return self._reachable

    def instructions(self) -> Iterator[HloInstruction]:
        """Every instruction of every computation, in file order."""
        for comp in self.computations.values():
            yield from comp.instructions

    def instruction(self, name: str) -> HloInstruction:
        """The instruction called ``name`` (with or without ``%``), from any computation."""
        for comp in self.computations.values():
            instr = comp.get(name)
            if instr is not None:
                return instr
        raise UnknownNameError(
            f"No instruction {name!r} in module {self.name!r}. Instruction names are "
            "the left-hand sides of the HLO lines, e.g. 'dot.3' for '%dot.3 = ...'."
        )

    def computation(self, name: str) -> HloComputation:
        """The computation called ``name`` (with or without ``%``)."""
        try:
            return self.computations[name.lstrip("%")]
        except KeyError:
            raise UnknownNameError(
                f"No computation {name!r} in module {self.name!r}; it has "
                f"{list(self.computations)[:5]}..."
            ) from None

    def callers(self, computation: str) -> list[HloInstruction]:
        """The instructions that call ``computation`` (by name), in file order.

        The index behind this is built on the first call; parse again after
        editing a module's call structure.
        """
        if self._callers is None:
            self._callers = {}
            for instr in self.instructions():
                for ref in instr.called_computations:
                    users = self._callers.setdefault(ref.name, [])
                    if not users or users[-1] is not instr:
                        users.append(instr)
        return list(self._callers.get(computation.lstrip("%"), ()))

    def called(self, instr: HloInstruction) -> list[HloComputation]:
        """The computations ``instr`` calls that exist in this module."""
        return [
            self.computations[ref.name]
            for ref in instr.called_computations
            if ref.name in self.computations
        ]

    def edges(self, computation: str) -> list[HloEdge]:
        """The ``operand -> user`` edges of one computation; see `HloComputation.edges`."""
        return self.computation(computation).edges()
