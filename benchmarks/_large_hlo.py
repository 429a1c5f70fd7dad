"""A generated HLO module as large as a big model's dump, for parser and graph benchmarks.

`large_module` writes ``fusions`` fused computations of ``per_fusion`` instructions each,
called in a chain from ENTRY, in the shape of XLA's optimized text: layouts on every
shape, ``metadata`` with op names by layer and source lines, a scalar reducer, dots and
reduces among elementwise ops. 400 x 1,000 gives 408,405 instructions (each fusion's
reduces come on top of its 1,000) and 86.6 MB of text, the size of an LLM step with a
few hundred layers unrolled. (Issue 38's "63 MB" is not this module's size: it measured
86.6 MB when the issue was filed, too.)
"""

from __future__ import annotations

_OPS = ("add", "multiply", "subtract", "maximum", "tanh", "exponential", "negate", "divide")


def _meta(layer: int, op: str, line: int) -> str:
    return (
        f'metadata={{op_name="jit(train_step)/jvp(Model)/layers.{layer}/mlp/{op}" '
        f'source_file="/home/user/model.py" source_line={line}}}'
    )


def large_module(fusions: int = 400, per_fusion: int = 1_000) -> str:
    """HLO text of ``fusions * per_fusion`` instructions (plus ENTRY's and a reducer)."""
    out = [
        "HloModule jit_train_step, is_scheduled=true, entry_computation_layout="
        "{(f32[256,256]{1,0}, f32[256,256]{1,0})->f32[256,256]{1,0}}",
        "",
    ]
    out += [
        "%region_add (a: f32[], b: f32[]) -> f32[] {",
        "  %a = f32[] parameter(0)",
        "  %b = f32[] parameter(1)",
        "  ROOT %sum = f32[] add(f32[] %a, f32[] %b)",
        "}",
        "",
    ]
    shape = "f32[256,256]{1,0}"
    for f in range(fusions):
        out.append(
            f"%fused_computation.{f} (param_0.{f}: {shape}, param_1.{f}: {shape}) -> {shape} {{"
        )
        out.append(f"  %param_0.{f} = {shape} parameter(0)")
        out.append(f"  %param_1.{f} = {shape} parameter(1)")
        prev = f"param_0.{f}"
        for k in range(per_fusion - 3):
            name = f"v.{f}.{k}"
            meta = _meta(f, _OPS[k % len(_OPS)], 100 + k % 50)
            if k % 50 == 7:
                line = (
                    f"%{name} = {shape} dot({shape} %{prev}, {shape} %param_1.{f}), "
                    f"lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, {meta}"
                )
            elif k % 50 == 23:
                out.append(
                    f"  %r.{f}.{k} = f32[256]{{0}} reduce({shape} %{prev}, f32[] %z.{f}), "
                    f"dimensions={{1}}, to_apply=%region_add, {meta}"
                )
                line = (
                    f"%{name} = {shape} broadcast(f32[256]{{0}} %r.{f}.{k}), "
                    f"dimensions={{0}}, {meta}"
                )
            elif k == 0:
                line = f"%z.{f} = f32[] constant(0), {meta}"
                name = prev
            else:
                op = _OPS[k % len(_OPS)]
                if op in ("tanh", "exponential", "negate"):
                    line = f"%{name} = {shape} {op}({shape} %{prev}), {meta}"
                else:
                    line = f"%{name} = {shape} {op}({shape} %{prev}, {shape} %param_1.{f}), {meta}"
            out.append("  " + line)
            prev = name
        out.append(f"  ROOT %out.{f} = {shape} copy({shape} %{prev})")
        out += ["}", ""]
    out.append(f"ENTRY %main (x: {shape}, w: {shape}) -> {shape} {{")
    out.append(f"  %x = {shape} parameter(0)")
    out.append(f"  %w = {shape} parameter(1)")
    prev = "x"
    for f in range(fusions):
        root = "ROOT " if f == fusions - 1 else ""
        out.append(
            f"  {root}%fusion.{f} = {shape} fusion({shape} %{prev}, {shape} %w), kind=kLoop, "
            f"calls=%fused_computation.{f}, {_meta(f, 'fusion', 99)}"
        )
        prev = f"fusion.{f}"
    out += ["}", ""]
    return "\n".join(out)
