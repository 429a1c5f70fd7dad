"""Reading op names into scopes, and a fusion's owner, as fast as the graph needs them.

`_user_scopes` splits each op_name on the slashes outside brackets (by counting brackets
per slash-separated part), parses each name-stack component once, and finds the first
reader of each fused parameter in the pass that sums the fusion's work. These tests hold
the fast forms to the plain algorithms they replaced, including the odd inputs (slashes
inside brackets, unbalanced brackets, empty parts) a real module rarely has.
"""

import random
import re

import pytest

from tpukit.hlo import parse_hlo
from tpukit.hlo.analysis._user_scopes import (
    _first_component,
    _owner,
    _parse_op_name,
    parse_scope,
    split_scope,
)

_MARK = re.compile(r"[()\[\]/]")
_TRANSFORM = re.compile(r"([a-z_]+)\((.*)\)", re.DOTALL)
_FUNCTION_TRANSFORMS = {"jit", "pjit", "xla_pmap", "core_call", "custom_jvp_call"}
_STRUCTURE = re.compile(
    r"while|body|cond|scan|closed_call|core_call|remat|checkpoint|shard_map|"
    r"custom_jvp_call|custom_vjp_call|branch_\d+_fun|eval_jaxpr"
)


def reference_split(op_name: str) -> list[str]:
    """Split at each slash where fewer brackets are open than closed before it, or as many."""
    parts, depth, start = [], 0, 0
    for found in _MARK.finditer(op_name):
        char = found.group()
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif depth <= 0:
            parts.append(op_name[start : found.start()])
            start = found.start() + 1
    parts.append(op_name[start:])
    return [p for p in parts if p]


def reference_parse(components: list[str]) -> tuple[str, tuple[str, ...]]:
    """Unwrap each component's transformations, one regex match at a time."""
    direction, names = "plain", []
    for component in components:
        transforms = []
        found = _TRANSFORM.fullmatch(component)
        while found:
            transforms.append(found.group(1))
            component = found.group(2)
            found = _TRANSFORM.fullmatch(component)
        if "transpose" in transforms:
            direction = "backward"
        elif direction == "plain" and ("jvp" in transforms or "linearize" in transforms):
            direction = "forward"
        if transforms and transforms[-1] in _FUNCTION_TRANSFORMS:
            continue
        if component and not _STRUCTURE.fullmatch(component):
            names.append(component)
    return direction, tuple(names)


@pytest.mark.parametrize(
    "op_name",
    [
        "jit(step)/transpose(jvp(model (MLP)))/layers[0] (Linear)/dot_general",
        "jit(f)/jvp(g)/while/body/closed_call/add",
        "jit(f)/a(b/c)/d",
        "a[0/1]/b",
        "x)/y(/z",
        "//a//b/",
        "((a/b)/c",
        "",
        "/",
    ],
)
def test_op_names_split_on_slashes_outside_brackets(op_name):
    assert split_scope(op_name) == reference_split(op_name)


def test_random_op_names_split_as_the_bracket_scan_does():
    rng = random.Random(24)
    for _ in range(20_000):
        op_name = "".join(rng.choice("ab()[]//") for _ in range(rng.randint(0, 16)))
        assert split_scope(op_name) == reference_split(op_name), op_name


@pytest.mark.parametrize(
    "components",
    [
        ["jit(step)", "transpose(jvp(model (MLP)))", "layers[0] (Linear)"],
        ["jit(step)", "jvp(model)", "while", "body", "dense"],
        ["pjit(_where)", "linearize(f)", "cond", "branch_1_fun", "mlp"],
        ["transpose(jvp(jit(take_along_axis)))", "x"],
        ["jvp()", "", "custom_jvp_call(relu)"],
        [],
    ],
)
def test_name_stacks_parse_as_one_regex_at_a_time_does(components):
    assert parse_scope(components) == reference_parse(components)
    assert parse_scope(components) == reference_parse(components)  # again, from the caches


def test_random_op_names_parse_to_the_scope_of_their_components_less_the_last():
    # `_parse_op_name` parses the text before the last slash once for all the ops of a
    # scope when it can; it must give what the components less the last one give.
    rng = random.Random(24)
    for _ in range(20_000):
        op_name = "".join(rng.choice("abjvp()[]//") for _ in range(rng.randint(0, 18)))
        expected = reference_parse(reference_split(op_name)[:-1])
        assert _parse_op_name(op_name) == expected, op_name
        assert _first_component(op_name) == (reference_split(op_name) or [""])[0], op_name
    layer = "jit(step)/transpose(jvp(model (MLP)))/layers[0] (Linear)"
    for op in ("dot_general", "add", "x(y)", "a[0]", ""):
        expected = reference_parse(reference_split(f"{layer}/{op}")[:-1])
        assert _parse_op_name(f"{layer}/{op}") == expected


_FUSED_THROUGH_PLUMBING = """
HloModule m, entry_computation_layout={(f32[64]{0}, f32[64]{0})->f32[64]{0}}

%fused_computation (param_0: f32[64], param_1: f32[64]) -> f32[64] {
  %param_1 = f32[64]{0} parameter(1)
  %param_0 = f32[64]{0} parameter(0)
  %bitcast = f32[64]{0} bitcast(f32[64]{0} %param_0)
  %mul = f32[64]{0} multiply(f32[64]{0} %bitcast, f32[64]{0} %param_1), metadata={op_name="jit(f)/jvp(a)/mul"}
  ROOT %add = f32[64]{0} add(f32[64]{0} %mul, f32[64]{0} %param_1), metadata={op_name="jit(f)/jvp(b)/add"}
}

ENTRY %main (x: f32[64], y: f32[64]) -> f32[64] {
  %x = f32[64]{0} parameter(0)
  %y = f32[64]{0} parameter(1)
  ROOT %fusion = f32[64]{0} fusion(f32[64]{0} %x, f32[64]{0} %y), kind=kLoop, calls=%fused_computation
}
"""


def test_a_fused_parameter_read_through_plumbing_counts_for_the_op_that_reads_it():
    module = parse_hlo(_FUSED_THROUGH_PLUMBING)
    key, weight = _owner(module.entry.root, module)
    mul, add = ("forward", ("a",)), ("forward", ("b",))
    # [FLOPs, bytes written, bytes read, ops]: param_0 reaches mul through an unnamed
    # bitcast, param_1 is read first by mul; add writes the result.
    assert weight == {mul: [0, 0, 512, 1], add: [0, 256, 0, 1]}
    assert key == add


def test_a_backward_op_name_is_parsed_from_its_head_not_split_whole(monkeypatch):
    # A backward op's last component opens before its last slash (JAX's
    # ``transpose(jvp(model)/.../dot)``): the head is parsed, once for the ops of a
    # scope; a large module's 15,000 such names were each split whole before.
    from tpukit.hlo.analysis import _user_scopes

    _user_scopes.forget_parsed_scopes()
    split: list[str] = []
    real = _user_scopes._split_scope
    monkeypatch.setattr(_user_scopes, "_split_scope", lambda text: split.append(text) or real(text))
    names = [
        f"jit(step)/transpose(jvp(model)/layers.{k}/{scope}/{op})"
        for k in range(3)
        for scope in ("dense", "moe/experts.1/up")
        for op in ("dot_general", "add", "x[0]", "")
    ]
    for name in names:
        assert _parse_op_name(name) == reference_parse(reference_split(name)[:-1]), name
    assert not set(split) & set(names)
