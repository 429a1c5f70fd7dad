"""A constant without an op name goes where all its users are, not with its first user.

XLA shares one scalar constant among every layer that reads the same value (ResNet-18's
``f32[] 0``, read by each BatchNorm's ReLU). Placed beside its first user in text order,
it sat inside ``layer4[0]`` and the graph drew data flowing from the last layer back to
the first. It belongs to the scope its users share.
"""

from tpukit.hlo import parse_hlo
from tpukit.hlo.analysis._user_scopes import plan_scopes

_HLO = """HloModule shared_constants

ENTRY main {
  x = f32[16]{0} parameter(0)
  zero = f32[] constant(0)
  one = f32[] constant(1)
  two = f32[] constant(2)
  z1 = f32[16]{0} broadcast(zero), dimensions={}, metadata={op_name="jit(f)/block[1] (Block)/fc/broadcast_in_dim"}
  o0 = f32[16]{0} broadcast(one), dimensions={}, metadata={op_name="jit(f)/block[0] (Block)/fc/broadcast_in_dim"}
  t0 = f32[16]{0} broadcast(two), dimensions={}, metadata={op_name="jit(f)/block[0] (Block)/norm/broadcast_in_dim"}
  a0 = f32[16]{0} add(x, o0), metadata={op_name="jit(f)/block[0] (Block)/fc/add"}
  m0 = f32[16]{0} multiply(a0, t0), metadata={op_name="jit(f)/block[0] (Block)/norm/mul"}
  o1 = f32[16]{0} broadcast(one), dimensions={}, metadata={op_name="jit(f)/block[0] (Block)/norm/broadcast_in_dim"}
  r0 = f32[16]{0} maximum(m0, o1), metadata={op_name="jit(f)/block[0] (Block)/norm/max"}
  z0 = f32[16]{0} broadcast(zero), dimensions={}, metadata={op_name="jit(f)/block[0] (Block)/fc/broadcast_in_dim"}
  a1 = f32[16]{0} add(r0, z0), metadata={op_name="jit(f)/block[1] (Block)/fc/add"}
  ROOT r1 = f32[16]{0} maximum(a1, z1), metadata={op_name="jit(f)/block[1] (Block)/fc/max"}
}
"""


def _paths() -> dict[str, list[str]]:
    module = parse_hlo(_HLO)
    plan = plan_scopes(module.entry, module, None)
    return {name: plan.path[name] for name in ("zero", "one", "two", "z1", "o0")}


def test_a_constant_every_block_reads_sits_above_the_blocks():
    # zero's first user is block[1]'s; block[0] reads it too.
    assert _paths()["zero"] == []


def test_a_constant_two_scopes_of_one_block_read_sits_in_that_block():
    assert _paths()["one"] == ["block[0] (Block)"]  # block[0]'s fc and norm read it


def test_a_constant_one_scope_reads_stays_in_that_scope():
    assert _paths()["two"] == ["block[0] (Block)", "norm"]
