"""A generated HLO module shaped like a large model's optimized training step, for the
graph's speed and memory benchmark (`hlo_large_module.py`).

Where `_large_hlo` writes one long chain of identical fusions, this writes what an
unrolled mixture-of-experts transformer step looks like after XLA: per layer a layer-norm
fusion, attention dots (q, k, v, scores, context, output) with a softmax fusion, a
``while`` loop (a scan over micro-steps: tuple state, ``get-tuple-element``, a counter
and its condition), then experts, each a dot-with-bias fusion (``kOutput``), a GELU
fusion, a down dot, the two backward dots (``transpose(jvp(...))``), an ``all-reduce`` of
the gradient and an Adam update fusion; outputs gathered in a tuple. Every instruction
has a layout, most carry ``metadata`` with an ``op_name`` by layer and expert and a source
file and line, as JAX writes them. Deterministic: the same arguments give the same text.

    >>> text = realistic_module(400_000)   # about 400,000 instructions, about 63 MB
    >>> text.startswith("HloModule jit_train_step")
    True
"""

from __future__ import annotations

_T, _D, _F = 2048, 1024, 4096  # tokens, model width, expert width
_X = f"f32[{_T},{_D}]{{1,0}}"
_H = f"f32[{_T},{_F}]{{1,0}}"
_WUP = f"f32[{_D},{_F}]{{1,0}}"
_WDOWN = f"f32[{_F},{_D}]{{1,0}}"
_WSQ = f"f32[{_D},{_D}]{{1,0}}"
_VEC = f"f32[{_D}]{{0}}"
_FVEC = f"f32[{_F}]{{0}}"
_S = f"f32[{_T},{_T}]{{1,0}}"
_ROW = f"f32[{_T}]{{0}}"
_SCALAR = "f32[]"


class _Writer:
    """Lines of one module, with names unique across it (``name.N``)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0  # instructions written
        self._next = 0

    def name(self, stem: str) -> str:
        self._next += 1
        return f"{stem}.{self._next}"

    def op(self, stem: str, shape: str, rest: str, meta: str = "", root: bool = False) -> str:
        """Writes ``%stem.N = shape rest[, meta]`` and returns its name."""
        name = self.name(stem)
        tail = f", {meta}" if meta else ""
        self.lines.append(f"  {'ROOT ' if root else ''}%{name} = {shape} {rest}{tail}")
        self.count += 1
        return name


def _meta(scope: str, op: str, line: int, transpose: bool = False) -> str:
    path = f"jvp(Transformer)/{scope}/{op}"
    if transpose:
        path = f"transpose({path})"
    return (
        f'metadata={{op_name="jit(train_step)/{path}" '
        f'source_file="/home/user/model/transformer.py" source_line={line}}}'
    )


def _computation(w: _Writer, name: str, params: list[str], body) -> str:
    """A computation ``name`` with ``params`` (shapes); ``body(w, names)`` writes its
    instructions, the last being ROOT, and returns the root's shape."""
    header_at = len(w.lines)
    w.lines.append("")  # the header, once the root's shape is known
    names = [w.op("param", shape, f"parameter({i})") for i, shape in enumerate(params)]
    result = body(w, names)
    args = ", ".join(f"{n}: {s.split('{')[0]}" for n, s in zip(names, params))
    w.lines[header_at] = f"%{name} ({args}) -> {result.split('{')[0]} {{"
    w.lines += ["}", ""]
    return name


def _layer_norm(w: _Writer, p: list[str]) -> str:
    x, gamma, beta = p
    zero = w.op("constant", _SCALAR, "constant(0)")
    total = w.op(
        "reduce",
        _ROW,
        f"reduce({_X} %{x}, {_SCALAR} %{zero}), dimensions={{1}}, to_apply=%region_add",
    )
    inv = w.op("constant", _SCALAR, f"constant({1 / _D})")
    mean = w.op("multiply", _ROW, f"multiply({_ROW} %{total}, {_ROW} %{inv})")
    centred = w.op("subtract", _X, f"subtract({_X} %{x}, {_X} %{mean})")
    square = w.op("multiply", _X, f"multiply({_X} %{centred}, {_X} %{centred})")
    var = w.op(
        "reduce",
        _ROW,
        f"reduce({_X} %{square}, {_SCALAR} %{zero}), dimensions={{1}}, to_apply=%region_add",
    )
    eps = w.op("constant", _SCALAR, "constant(1e-06)")
    shifted = w.op("add", _ROW, f"add({_ROW} %{var}, {_ROW} %{eps})")
    scale = w.op("rsqrt", _ROW, f"rsqrt({_ROW} %{shifted})")
    wide = w.op("broadcast", _X, f"broadcast({_ROW} %{scale}), dimensions={{0}}")
    normed = w.op("multiply", _X, f"multiply({_X} %{centred}, {_X} %{wide})")
    g = w.op("broadcast", _X, f"broadcast({_VEC} %{gamma}), dimensions={{1}}")
    b = w.op("broadcast", _X, f"broadcast({_VEC} %{beta}), dimensions={{1}}")
    scaled = w.op("multiply", _X, f"multiply({_X} %{normed}, {_X} %{g})")
    w.op("add", _X, f"add({_X} %{scaled}, {_X} %{b})", root=True)
    return _X


def _softmax(w: _Writer, p: list[str]) -> str:
    (s,) = p
    low = w.op("constant", _SCALAR, "constant(-inf)")
    top = w.op(
        "reduce",
        _ROW,
        f"reduce({_S} %{s}, {_SCALAR} %{low}), dimensions={{1}}, to_apply=%region_max",
    )
    wide = w.op("broadcast", _S, f"broadcast({_ROW} %{top}), dimensions={{0}}")
    shifted = w.op("subtract", _S, f"subtract({_S} %{s}, {_S} %{wide})")
    e = w.op("exponential", _S, f"exponential({_S} %{shifted})")
    zero = w.op("constant", _SCALAR, "constant(0)")
    total = w.op(
        "reduce",
        _ROW,
        f"reduce({_S} %{e}, {_SCALAR} %{zero}), dimensions={{1}}, to_apply=%region_add",
    )
    wide2 = w.op("broadcast", _S, f"broadcast({_ROW} %{total}), dimensions={{0}}")
    w.op("divide", _S, f"divide({_S} %{e}, {_S} %{wide2})", root=True)
    return _S


def _dot_bias(w: _Writer, p: list[str]) -> str:
    x, wt, bias = p
    d = w.op(
        "dot",
        _H,
        f"dot({_X} %{x}, {_WUP} %{wt}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
    )
    b = w.op("broadcast", _H, f"broadcast({_FVEC} %{bias}), dimensions={{1}}")
    w.op("add", _H, f"add({_H} %{d}, {_H} %{b})", root=True)
    return _H


def _gelu(w: _Writer, p: list[str]) -> str:
    (x,) = p
    sq = w.op("multiply", _H, f"multiply({_H} %{x}, {_H} %{x})")
    cube = w.op("multiply", _H, f"multiply({_H} %{sq}, {_H} %{x})")
    c = w.op("constant", _SCALAR, "constant(0.044715)")
    cb = w.op("broadcast", _H, f"broadcast({_SCALAR} %{c}), dimensions={{}}")
    t = w.op("multiply", _H, f"multiply({_H} %{cube}, {_H} %{cb})")
    inner = w.op("add", _H, f"add({_H} %{x}, {_H} %{t})")
    k = w.op("constant", _SCALAR, "constant(0.797884583)")
    kb = w.op("broadcast", _H, f"broadcast({_SCALAR} %{k}), dimensions={{}}")
    arg = w.op("multiply", _H, f"multiply({_H} %{inner}, {_H} %{kb})")
    th = w.op("tanh", _H, f"tanh({_H} %{arg})")
    one = w.op("constant", _SCALAR, "constant(1)")
    ob = w.op("broadcast", _H, f"broadcast({_SCALAR} %{one}), dimensions={{}}")
    s = w.op("add", _H, f"add({_H} %{th}, {_H} %{ob})")
    half = w.op("constant", _SCALAR, "constant(0.5)")
    hb = w.op("broadcast", _H, f"broadcast({_SCALAR} %{half}), dimensions={{}}")
    xs = w.op("multiply", _H, f"multiply({_H} %{x}, {_H} %{s})")
    w.op("multiply", _H, f"multiply({_H} %{xs}, {_H} %{hb})", root=True)
    return _H


def _adam(shape: str):
    def body(w: _Writer, p: list[str]) -> str:
        param, grad, m, lr = p
        b1 = w.op("constant", _SCALAR, "constant(0.9)")
        b1b = w.op("broadcast", shape, f"broadcast({_SCALAR} %{b1}), dimensions={{}}")
        mm = w.op("multiply", shape, f"multiply({shape} %{m}, {shape} %{b1b})")
        gg = w.op("multiply", shape, f"multiply({shape} %{grad}, {shape} %{grad})")
        m2 = w.op("add", shape, f"add({shape} %{mm}, {shape} %{gg})")
        root = w.op("sqrt", shape, f"sqrt({shape} %{m2})")
        step = w.op("divide", shape, f"divide({shape} %{grad}, {shape} %{root})")
        lrb = w.op("broadcast", shape, f"broadcast({_SCALAR} %{lr}), dimensions={{}}")
        upd = w.op("multiply", shape, f"multiply({shape} %{step}, {shape} %{lrb})")
        new = w.op("subtract", shape, f"subtract({shape} %{param}, {shape} %{upd})")
        tup = f"({shape}, {shape})"
        w.op("tuple", tup, f"tuple({shape} %{new}, {shape} %{m2})", root=True)
        return tup

    return body


def _scan_body(w: _Writer, p: list[str]) -> str:
    (state,) = p
    tup = f"(s32[], {_X}, {_WSQ})"
    i = w.op("get-tuple-element", "s32[]", f"get-tuple-element({tup} %{state}), index=0")
    x = w.op("get-tuple-element", _X, f"get-tuple-element({tup} %{state}), index=1")
    wt = w.op("get-tuple-element", _WSQ, f"get-tuple-element({tup} %{state}), index=2")
    one = w.op("constant", "s32[]", "constant(1)")
    nxt = w.op("add", "s32[]", f"add(s32[] %{i}, s32[] %{one})")
    d = w.op(
        "dot",
        _X,
        f"dot({_X} %{x}, {_WSQ} %{wt}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
    )
    t = w.op("tanh", _X, f"tanh({_X} %{d})")
    w.op("tuple", tup, f"tuple(s32[] %{nxt}, {_X} %{t}, {_WSQ} %{wt})", root=True)
    return tup


def _scan_condition(w: _Writer, p: list[str]) -> str:
    (state,) = p
    tup = f"(s32[], {_X}, {_WSQ})"
    i = w.op("get-tuple-element", "s32[]", f"get-tuple-element({tup} %{state}), index=0")
    n = w.op("constant", "s32[]", "constant(4)")
    w.op("compare", "pred[]", f"compare(s32[] %{i}, s32[] %{n}), direction=LT", root=True)
    return "pred[]"


def _header(w: _Writer) -> None:
    w.lines += [
        "HloModule jit_train_step, is_scheduled=true, entry_computation_layout="
        f"{{({_X}, f32[])->{_X}}}",
        "",
    ]
    for name, op in (("region_add", "add"), ("region_max", "maximum")):
        _computation(
            w,
            name,
            [_SCALAR, _SCALAR],
            lambda w, p, op=op: (
                w.op(op, _SCALAR, f"{op}({_SCALAR} %{p[0]}, {_SCALAR} %{p[1]})", root=True),
                _SCALAR,
            )[1],
        )


def _fusion(
    w: _Writer,
    entry: list[str],
    stem: str,
    shape: str,
    kind: str,
    called: str,
    args: list[tuple[str, str]],
    meta: str,
) -> str:
    """A fusion instruction written into ENTRY's lines (kept apart: ENTRY comes last)."""
    name = w.name(stem)
    operands = ", ".join(f"{s} %{n}" for n, s in args)
    entry.append(f"  %{name} = {shape} fusion({operands}), kind={kind}, calls=%{called}, {meta}")
    w.count += 1
    return name


def _entry_op(
    w: _Writer, entry: list[str], stem: str, shape: str, rest: str, meta: str = ""
) -> str:
    name = w.name(stem)
    tail = f", {meta}" if meta else ""
    entry.append(f"  %{name} = {shape} {rest}{tail}")
    w.count += 1
    return name


def realistic_module(instructions: int = 400_000, experts: int = 48) -> str:
    """HLO text of about ``instructions`` instructions (at least one layer), in layers of
    ``experts`` experts each."""
    if instructions < 1 or experts < 1:
        raise ValueError("realistic_module needs at least 1 instruction and 1 expert")
    w = _Writer()
    _header(w)
    entry: list[str] = []
    x = first = _entry_op(w, entry, "x", _X, "parameter(0)")
    lr = _entry_op(w, entry, "lr", _SCALAR, "parameter(1)")
    outputs: list[tuple[str, str]] = []
    layer = 0
    while w.count < instructions:
        scope = f"layers.{layer}"
        line = 100 + (layer % 7) * 40

        def weight(shape: str, what: str, scope: str = scope, line: int = line) -> str:
            return _entry_op(
                w, entry, "constant", shape, "constant({...})", _meta(scope, what, line)
            )

        gamma, beta = weight(_VEC, "ln/scale"), weight(_VEC, "ln/bias")
        ln = _computation(w, w.name("fused_layer_norm"), [_X, _VEC, _VEC], _layer_norm)
        h = _fusion(
            w,
            entry,
            "layer_norm_fusion",
            _X,
            "kLoop",
            ln,
            [(x, _X), (gamma, _VEC), (beta, _VEC)],
            _meta(scope, "ln/add", line + 1),
        )
        proj = {}
        for what in ("q", "k", "v"):
            wt = weight(_WSQ, f"attn/{what}/kernel")
            proj[what] = _entry_op(
                w,
                entry,
                "dot",
                _X,
                f"dot({_X} %{h}, {_WSQ} %{wt}), lhs_contracting_dims={{1}}, "
                "rhs_contracting_dims={0}",
                _meta(scope, f"attn/{what}/dot_general", line + 2),
            )
        kt = _entry_op(
            w,
            entry,
            "transpose",
            f"f32[{_D},{_T}]{{1,0}}",
            f"transpose({_X} %{proj['k']}), dimensions={{1,0}}",
            _meta(scope, "attn/transpose", line + 3),
        )
        scores = _entry_op(
            w,
            entry,
            "dot",
            _S,
            f"dot({_X} %{proj['q']}, f32[{_D},{_T}]{{1,0}} %{kt}), "
            "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
            _meta(scope, "attn/scores/dot_general", line + 4),
        )
        sm = _computation(w, w.name("fused_softmax"), [_S], _softmax)
        probs = _fusion(
            w,
            entry,
            "softmax_fusion",
            _S,
            "kLoop",
            sm,
            [(scores, _S)],
            _meta(scope, "attn/softmax/div", line + 5),
        )
        ctx = _entry_op(
            w,
            entry,
            "dot",
            _X,
            f"dot({_S} %{probs}, {_X} %{proj['v']}), "
            "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
            _meta(scope, "attn/context/dot_general", line + 6),
        )
        wo = weight(_WSQ, "attn/out/kernel")
        out = _entry_op(
            w,
            entry,
            "dot",
            _X,
            f"dot({_X} %{ctx}, {_WSQ} %{wo}), "
            "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
            _meta(scope, "attn/out/dot_general", line + 7),
        )
        x = _entry_op(
            w,
            entry,
            "add",
            _X,
            f"add({_X} %{x}, {_X} %{out})",
            _meta(scope, "attn/residual/add", line + 8),
        )
        # A scan over micro-steps: the loop's state is a tuple (counter, activation, weight).
        body = _computation(w, w.name("scan_body"), [f"(s32[], {_X}, {_WSQ})"], _scan_body)
        cond = _computation(w, w.name("scan_cond"), [f"(s32[], {_X}, {_WSQ})"], _scan_condition)
        zero = _entry_op(w, entry, "constant", "s32[]", "constant(0)")
        ws = weight(_WSQ, "scan/kernel")
        tup = f"(s32[], {_X}, {_WSQ})"
        init = _entry_op(w, entry, "tuple", tup, f"tuple(s32[] %{zero}, {_X} %{x}, {_WSQ} %{ws})")
        loop = _entry_op(
            w,
            entry,
            "while",
            tup,
            f"while({tup} %{init}), condition=%{cond}, "
            f'body=%{body}, backend_config={{"known_trip_count":{{"n":"4"}}}}',
            _meta(scope, "scan/while", line + 9),
        )
        x = _entry_op(
            w,
            entry,
            "get-tuple-element",
            _X,
            f"get-tuple-element({tup} %{loop}), index=1",
            _meta(scope, "scan/while", line + 9),
        )
        mixed = x
        for e in range(experts):
            if w.count >= instructions:
                break
            escope = f"{scope}/moe/experts.{e}"
            up = weight(_WUP, f"moe/experts.{e}/up/kernel")
            bias = weight(_FVEC, f"moe/experts.{e}/up/bias")
            dot_bias = _computation(w, w.name("fused_dot_bias"), [_X, _WUP, _FVEC], _dot_bias)
            hid = _fusion(
                w,
                entry,
                "dot_bias_fusion",
                _H,
                "kOutput",
                dot_bias,
                [(x, _X), (up, _WUP), (bias, _FVEC)],
                _meta(escope, "up/dot_general", line + 10),
            )
            ge = _computation(w, w.name("fused_gelu"), [_H], _gelu)
            act = _fusion(
                w,
                entry,
                "gelu_fusion",
                _H,
                "kLoop",
                ge,
                [(hid, _H)],
                _meta(escope, "gelu/mul", line + 11),
            )
            down = weight(_WDOWN, f"moe/experts.{e}/down/kernel")
            y = _entry_op(
                w,
                entry,
                "dot",
                _X,
                f"dot({_H} %{act}, {_WDOWN} %{down}), "
                "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                _meta(escope, "down/dot_general", line + 12),
            )
            mixed = _entry_op(
                w,
                entry,
                "add",
                _X,
                f"add({_X} %{mixed}, {_X} %{y})",
                _meta(escope, "combine/add", line + 13),
            )
            # Backward: the two dots of the down projection's gradient.
            dact = _entry_op(
                w,
                entry,
                "dot",
                _H,
                f"dot({_X} %{mixed}, {_WDOWN} %{down}), "
                "lhs_contracting_dims={1}, rhs_contracting_dims={1}",
                _meta(escope, "down/dot_general", line + 12, transpose=True),
            )
            gdown = _entry_op(
                w,
                entry,
                "dot",
                _WDOWN,
                f"dot({_H} %{act}, {_X} %{mixed}), "
                "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
                _meta(escope, "down/dot_general", line + 12, transpose=True),
            )
            gsum = _entry_op(
                w,
                entry,
                "all-reduce",
                _WDOWN,
                f"all-reduce({_WDOWN} %{gdown}), "
                "channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%region_add",
                _meta(escope, "down/psum", line + 14, transpose=True),
            )
            adam = _computation(
                w, w.name("fused_adam"), [_WDOWN, _WDOWN, _WDOWN, _SCALAR], _adam(_WDOWN)
            )
            pair = f"({_WDOWN}, {_WDOWN})"
            upd = _fusion(
                w,
                entry,
                "adam_fusion",
                pair,
                "kLoop",
                adam,
                [(down, _WDOWN), (gsum, _WDOWN), (gdown, _WDOWN), (lr, _SCALAR)],
                _meta(escope, "optax/adam/sub", 300),
            )
            new = _entry_op(
                w, entry, "get-tuple-element", _WDOWN, f"get-tuple-element({pair} %{upd}), index=0"
            )
            outputs.append((new, _WDOWN))
            outputs.append((dact, _H))
        x = mixed
        layer += 1
    result = f"({', '.join(s for _, s in outputs)}, {_X})"
    operands = ", ".join(f"{s} %{n}" for n, s in outputs)
    entry.append(f"  ROOT %{w.name('tuple')} = {result} tuple({operands}, {_X} %{x})")
    w.count += 1
    w.lines.append(f"ENTRY %main ({first}: f32[{_T},{_D}], {lr}: f32[]) -> {result} {{")
    w.lines += entry
    w.lines += ["}", ""]
    return "\n".join(w.lines)
