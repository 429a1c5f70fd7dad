"""The model's structure in the program: NNX layers name their ops, the graph follows them.

`tpukit.compile` traces every NNX module call under a name scope of its path and class
(`module_scopes`); XLA keeps the scopes in both stages' op metadata; the graph then opens
a training step on its sections (inputs, forward by layer, loss, backward by layer,
optimizer update, outputs) with each layer's backward named after its forward.
"""

import pathlib
import re

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import tpukit
from tests._support.steps import tutorial_train_step
from tpukit._compat import iter_modules, module_list
from tpukit.compilation._module_scopes import module_scopes, path_text
from tpukit.graph._first_view import first_view as groups_opened
from tpukit.graph._graph_data import INSTRUCTION, PART, SCOPE
from tpukit.graph._graph_payload import graph_payload
from tpukit.hlo.analysis._cost import instruction_count

SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "out" / "screenshots"
SECTIONS = ["inputs", "forward", "loss", "backward", "optimizer update", "outputs"]
LAYERS = ["layers[0] (Linear)", "layers[1] (Linear)", "layers[2] (Linear)"]


class Block(nnx.Module):
    def __init__(self, width: int, rngs: nnx.Rngs):
        self.conv1 = nnx.Linear(width, width, rngs=rngs)

    def __call__(self, x):
        return x + jax.nn.relu(self.conv1(x))


class Net(nnx.Module):
    """Submodules in a list inside a list: paths like ``layer2[1].conv1``."""

    def __init__(self, rngs: nnx.Rngs):
        self.stem = nnx.Linear(4, 8, rngs=rngs)
        self.layer2 = module_list([Block(8, rngs), Block(8, rngs)])

    def __call__(self, x):
        x = self.stem(x)
        for block in self.layer2:
            x = block(x)
        return x


def scopes_of(compiled, stage):
    return {
        i.metadata.op_name.rsplit("/", 1)[0]
        for i in compiled.hlo_module(stage).instructions()
        if i.metadata.op_name
    }


def first_view(graph):
    """``{group label: [child labels]}`` of the groups open in the first view."""
    data = graph._data
    return {data.label[g]: [data.label[k] for k in data.children[g]] for g in groups_opened(data)}


@pytest.mark.parametrize("stage", ["lowered", "optimized"])
def test_each_layer_call_is_a_name_scope_in_both_stages(tutorial_step, stage):
    scopes = scopes_of(tutorial_step, stage)
    for layer in LAYERS:
        assert f"jit(train_step)/jvp(model (MLP))/{layer}" in scopes, sorted(scopes)
        assert f"jit(train_step)/transpose(jvp(model (MLP)))/{layer}" in scopes, sorted(scopes)


def test_nested_modules_nest_their_scopes_and_classes_are_restored():
    model = Net(nnx.Rngs(0))
    calls = {cls: cls.__dict__.get("__call__") for cls in (Net, Block, nnx.Linear)}
    compiled = tpukit.compile(model, tpukit.shape("f32[2,4]"))
    scopes = scopes_of(compiled, "optimized") | scopes_of(compiled, "lowered")
    assert "jit(Net)/model (Net)/layer2[1] (Block)/layer2[1].conv1 (Linear)" in scopes, scopes
    assert "jit(Net)/model (Net)/stem (Linear)" in scopes, scopes
    assert {cls: cls.__dict__.get("__call__") for cls in calls} == calls


def test_classes_are_restored_when_tracing_fails():
    model = Net(nnx.Rngs(0))
    original = nnx.Linear.__dict__["__call__"]

    def broken(model, x):
        model(x)
        raise RuntimeError("the user's bug")

    with pytest.raises(tpukit.CompileError, match="the user's bug"):
        tpukit.compile(broken, model, tpukit.shape("f32[2,4]"))
    assert nnx.Linear.__dict__["__call__"] is original
    assert "__call__" not in Block.__dict__ or Block.__dict__["__call__"].__name__ == "__call__"


def test_module_scopes_inside_a_jitted_step_as_fit_uses_it():
    """A step that merges the model from its state calls ``module_scopes(model)`` itself."""
    model = Net(nnx.Rngs(0))
    graphdef, state = nnx.split(model)

    def run(state, x):
        merged = nnx.merge(graphdef, state)
        with module_scopes(merged):
            return merged(x)

    text = jax.jit(run).lower(state, jnp.ones((2, 4))).as_text(dialect="hlo", debug_info=True)
    assert "model (Net)/layer2[0] (Block)/layer2[0].conv1 (Linear)" in text
    assert nnx.Linear.__dict__["__call__"].__name__ == "__call__"


def test_a_module_outside_a_block_traces_without_scopes():
    layer = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    text = jax.jit(lambda x: layer(x)).lower(jnp.ones((1, 2))).as_text(debug_info=True)
    assert "(Linear)" not in text


def test_paths_read_as_python():
    assert path_text(("layer2", 1, "conv1")) == "layer2[1].conv1"
    assert path_text(("blocks", "a-b")) == "blocks['a-b']"
    assert path_text(()) == ""


@pytest.mark.parametrize("stage", ["lowered", "optimized"])
def test_a_training_step_opens_on_its_sections_with_layers_in_order(tutorial_step, stage):
    view = first_view(tutorial_step.graph(stage))
    data = tutorial_step.graph(stage)._data
    assert data.label[0] == "train_step"
    assert view["train_step"] == SECTIONS
    assert [x for x in view["forward"] if "Linear" in x] == LAYERS
    # the backward pass, closed when it does not fit the first view's frame with the
    # forward pass open (issue 38), holds its layers last to first
    section = next(g for g, name in data.section.items() if name == "backward")
    backward = [data.label[k] for k in data.children[section]]
    backward = [x for x in backward if x.endswith(" backward")]
    assert backward == ["loss backward", *[f"{x} backward" for x in reversed(LAYERS)]]
    for name in ("inputs", "loss", "optimizer update", "outputs"):
        assert name not in view  # closed: parameters and optimizer state do not clutter
    internal = re.compile(r"jit\(|jvp\(|transpose\(|main\.\d+")
    shown, _ = data.visible(set(groups_opened(data)))
    labels = [data.label[n] for n in shown] + [data.label[g] for g in groups_opened(data)]
    assert not [x for x in labels if internal.search(x)], labels


def test_each_section_and_layer_carries_its_flops_and_bytes(tutorial_step):
    data = tutorial_step.graph("optimized")._data
    payload = graph_payload(data, "train_step", "optimized")
    groups = {data.label[i]: i for i in range(len(data.kind)) if data.kind[i] == SCOPE}
    for name in ("forward", "backward", *LAYERS):
        assert payload["flops"][groups[name]] > 0 and payload["bytes"][groups[name]] > 0
    linear_0 = 2 * 128 * 784 * 128  # x @ W of layers[0]: (128x784) @ (784x128)
    assert payload["flops"][groups["layers[0] (Linear)"]] == linear_0
    assert payload["flops"][groups["layers[0] (Linear) backward"]] == linear_0  # dW only
    assert payload["flops"][groups["optimizer update"]] == 0
    assert payload["bytes"][groups["optimizer update"]] > 0


def test_a_layers_backward_is_tied_to_its_forward(tutorial_step):
    data = tutorial_step.graph("optimized")._data
    groups = {data.label[i]: i for i in range(len(data.kind)) if data.kind[i] == SCOPE}
    for layer in LAYERS:
        backward = data.notes[groups[f"{layer} backward"]]
        forward = data.notes[groups[layer]]
        assert f"forward pass is in forward › {layer}" in backward
        assert f"backward pass is in backward › {layer} backward" in forward


def test_a_fusion_of_several_layers_goes_where_its_flops_are(tutorial_step):
    data = tutorial_step.graph("optimized")._data
    mixed = [i for i in data.notes if data.kind[i] == INSTRUCTION]
    assert mixed, "the optimized step fuses ops of several scopes"
    for node in mixed:
        note, parent = data.notes[node], data.parent[node]
        while data.kind[parent] == PART:  # a stage of a group's data flow (issue 38)
            parent = data.parent[parent]
        where = note.removeprefix("placed in ").split(", the source of")[0]
        assert where.split(" › ")[-1] == data.label[parent] or where == data.label[parent], note
    dot_fusions = [
        i
        for i, ins in enumerate(data.instr)
        if ins is not None
        and ins.opcode == "fusion"
        and any(inner.opcode == "dot" for c in data.module.called(ins) for inner in c)
    ]
    for node in dot_fusions:  # a fusion holding a layer's matmul sits in that layer
        label = data.label[data.parent[node]]
        assert label.startswith("layers[") or label == "part", label


def test_user_scopes_and_unscoped_code_keep_their_names():
    def f(x, w):
        with jax.named_scope("encoder"):
            h = jnp.tanh(x @ w)
        with jax.named_scope("decoder"):
            return jnp.sin(h @ w.T) * 2

    compiled = tpukit.compile(f, tpukit.shape("f32[8,16]"), tpukit.shape("f32[16,16]"))
    view = first_view(compiled.graph("lowered"))
    assert compiled.graph().title == "f"
    labels = [x for children in view.values() for x in children]
    assert "encoder" in labels and "decoder" in labels, view


def test_the_step_screenshot_shows_sections_top_to_bottom(browser, tutorial_step):
    g = tutorial_step.graph("optimized")
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(g.to_html())
    page.wait_for_selector(".tkg-root[data-state=ready]", timeout=15000)
    status = page.locator(".tkg-status").inner_text()
    # The page counts instructions as written (each computation once), as the summary does.
    assert f"{instruction_count(g.module):,} instructions as written" in status, status
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "model_scopes_train_step.png"))
    page.locator(".tkg-fit").click()
    page.screenshot(path=str(SCREENSHOTS / "model_scopes_train_step_fit.png"))
    tops = []
    for name in SECTIONS:
        box = page.locator(f'.tkg-root [data-name="{name}"]').first.bounding_box()
        tops.append(box["y"])
    assert tops == sorted(tops), dict(zip(SECTIONS, tops))
    header = page.locator('.tkg-group[data-name="forward"] .tkg-header > text').text_content()
    assert re.search(r"forward +· \d+ ops · [\d.]+ MFLOP · [\d.]+ [KM]iB", header), header
    page.locator('.tkg-node[data-name="layers[0] (Linear)"]').click()
    panel = page.locator(".tkg-panel").inner_text()
    assert "its backward pass is in backward › layers[0] (Linear) backward" in panel
    assert errors == []
    page.close()


ZOO_FAMILIES = {  # small configurations of each family, so that a step compiles in seconds
    "mlp": {},
    "lenet5": {},
    "vgg11": {"small_input": True, "num_classes": 10},
    "resnet18": {"num_classes": 10, "small_input": True, "image_size": 32},
    "gpt_small": {"vocab_size": 64, "depth": 2, "width": 32, "num_heads": 2, "context_length": 16},
}


@pytest.mark.parametrize("family", sorted(ZOO_FAMILIES))
def test_every_zoo_familys_layers_are_groups_forward_and_backward(family):
    model = tpukit.zoo.create(family, seed=0, **ZOO_FAMILIES[family])
    if family == "gpt_small":
        x, labels = tpukit.shape("s32[2,16]"), tpukit.shape("s32[2,16]")
    else:
        side = model.input_shape
        x = tpukit.shape(f"f32[2,{','.join(map(str, side))}]")
        labels = tpukit.shape("s32[2]")
    train_step, opt_state = tutorial_train_step(model)
    step = tpukit.compile(train_step, model, opt_state, x, labels)
    data = step.graph("optimized")._data
    groups = {data.label[i] for i in range(len(data.kind)) if data.kind[i] == SCOPE}
    # every layer holding its own weights, named by its path and class as Python reads it
    layers = [
        f"{path_text(path)} ({type(module).__name__})"
        for path, module in iter_modules(model)
        if path and any(isinstance(v, nnx.Param) for v in vars(module).values())
    ]
    assert layers, "the model has layers"
    missing_forward = [name for name in layers if name not in groups]
    missing_backward = [name for name in layers if f"{name} backward" not in groups]
    assert not missing_forward and not missing_backward, (missing_forward, missing_backward)
