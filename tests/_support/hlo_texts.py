"""HLO modules that test files of several folders read, written once.

`SCAN` and `TWO_CALLS` are small modules written by hand (their figures are counted on paper
in ``hlo/test_counting.py``); `unnamed_module` and `named_module` generate programs of
20,000+ instructions, without op names (as the JAX SPMD partitioner leaves many) and with
them, for the graph's first view and the fingerprints::

    tpukit.hlo.open(SCAN).op_counts()
    tpukit.hlo.graph(unnamed_module(), title="flat")
"""

# One step: dot f32[8,16] x f32[16,16] -> f32[8,16]: 2 * 8*16 * 16 = 4,096 FLOPs.
# Counter at index 1: starts at 0, +1 per step, runs while < 16: 16 steps.
# dot/conv FLOPs = 16 * 4,096 = 65,536.
# all FLOPs add the counter's add (1 per step) and the compare (1 per test, 17 tests):
#   65,536 + 16 + 17 = 65,569.
# Bytes per step: dot reads 512 + 1,024 and writes 512 = 2,048; add reads 4 + 4 and writes
# 4 = 12; per condition test: compare reads 4 + 4 and writes pred 1 = 9.
#   16 * 2,060 + 17 * 9 = 33,113 (parameters, constants, tuples, gte move nothing).
SCAN = """HloModule scan16

body {
  p_body = (f32[8,16], s32[], f32[16,16]) parameter(0)
  x = f32[8,16] get-tuple-element(p_body), index=0
  i = s32[] get-tuple-element(p_body), index=1
  w = f32[16,16] get-tuple-element(p_body), index=2
  y = f32[8,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  one = s32[] constant(1)
  inc = s32[] add(i, one)
  ROOT root = (f32[8,16], s32[], f32[16,16]) tuple(y, inc, w)
}

condition {
  p_cond = (f32[8,16], s32[], f32[16,16]) parameter(0)
  gte = s32[] get-tuple-element(p_cond), index=1
  limit = s32[] constant(16)
  ROOT result = pred[] compare(gte, limit), direction=LT
}

ENTRY entry {
  x0 = f32[8,16] parameter(0)
  w0 = f32[16,16] parameter(1)
  zero = s32[] constant(0)
  init = (f32[8,16], s32[], f32[16,16]) tuple(x0, zero, w0)
  loop = (f32[8,16], s32[], f32[16,16]) while(init), condition=condition, body=body
  ROOT out = f32[8,16] get-tuple-element(loop), index=0
}
"""


# A computation called from two places (two `call`s of `layer`, one dot of 4,096 FLOPs):
# as written it has 5 instructions (ENTRY) + 4 (layer) = 9, counted once;
# as executed its dot runs twice: 8,192 FLOPs. The computation `dead` is called by
# nothing, so neither is `dead_inner`, which it calls: both are left out (they would add
# a dot, a negate and 7 instructions).
TWO_CALLS = """HloModule two_calls

layer {
  x = f32[8,16] parameter(0)
  w = f32[16,16] parameter(1)
  d = f32[8,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[8,16] tanh(d)
}

dead_inner {
  x = f32[8,16] parameter(0)
  w = f32[16,16] parameter(1)
  d = f32[8,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[8,16] negate(d)
}

dead {
  x = f32[8,16] parameter(0)
  w = f32[16,16] parameter(1)
  ROOT r = f32[8,16] call(x, w), to_apply=dead_inner
}

ENTRY main {
  x = f32[8,16] parameter(0)
  w = f32[16,16] parameter(1)
  a = f32[8,16] call(x, w), to_apply=layer
  b = f32[8,16] call(a, w), to_apply=layer
  ROOT c = f32[8,16] add(a, b)
}
"""


def unnamed_module(blocks: int = 200, per_block: int = 100) -> str:
    """25,000 instructions: constants, copies, multiplies and reshapes; 20 dots."""
    lines = ["HloModule big_unnamed", "", "ENTRY main {"]
    lines += ["  x = f32[64,64] parameter(0)", "  w = f32[64,64] parameter(1)"]
    prev, k = "x", 0
    for block in range(blocks):
        for j in range(per_block):
            k += 1
            if j % 4 == 0:
                lines.append(f"  c{k} = f32[64,64] constant({{...}})")
            elif j % 4 == 1:
                lines.append(f"  v{k} = f32[64,64] copy({prev})")
                prev = f"v{k}"
            elif j % 4 == 2:
                lines.append(f"  v{k} = f32[64,64] multiply({prev}, c{k - 2})")
                prev = f"v{k}"
            else:
                lines.append(f"  v{k} = f32[4096] reshape({prev})")
                lines.append(f"  r{k} = f32[64,64] reshape(v{k})")
                prev = f"r{k}"
        if block % 10 == 5:
            lines.append(
                f"  d{k} = f32[64,64] dot({prev}, w), lhs_contracting_dims={{1}}, "
                "rhs_contracting_dims={0}"
            )
            prev = f"d{k}"
    lines += [f"  ROOT out = f32[64,64] copy({prev})", "}", ""]
    return "\n".join(lines)


def named_module(layers: int = 4, rope: int = 20, filler: int = 5_000) -> str:
    """20,000+ instructions: a RoPE table from an iota and constants, then the layers."""
    meta = 'metadata={op_name="jit(step)/rope/%s"}'
    lines = ["HloModule big_named", "", "ENTRY main {"]
    lines += ["  x = f32[64,64] parameter(0)", "  w = f32[64,64] parameter(1)"]
    lines.append(f"  pos = s32[64,64] iota(), iota_dimension=0, {meta % 'iota'}")
    lines.append(f"  posf = f32[64,64] convert(pos), {meta % 'convert'}")
    prev = "posf"
    for r in range(rope):
        lines.append(f"  rc{r} = f32[] constant(0.5), {meta % 'mul'}")
        lines.append(f"  rb{r} = f32[64,64] broadcast(rc{r}), dimensions={{}}, {meta % 'mul'}")
        lines.append(f"  rope{r} = f32[64,64] multiply({prev}, rb{r}), {meta % 'mul'}")
        prev = f"rope{r}"
    lines.append(f"  table = f32[64,64] cosine({prev}), {meta % 'cos'}")
    prev, k = "x", 0
    for layer in range(layers):
        scope = f'metadata={{op_name="jit(step)/layers.{layer}/%s"}}'
        lines.append(
            f"  d{layer} = f32[64,64] dot({prev}, w), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{0}}, {scope % 'dot_general'}"
        )
        lines.append(f"  a{layer} = f32[64,64] add(d{layer}, table), {scope % 'add'}")
        prev = f"a{layer}"
        for _ in range(filler):
            k += 1
            lines.append(f"  t{k} = f32[64,64] tanh({prev}), {scope % 'tanh'}")
            prev = f"t{k}"
    lines += [f"  ROOT out = f32[64,64] copy({prev})", "}", ""]
    return "\n".join(lines)
