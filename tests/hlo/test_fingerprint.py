"""Every number stays the same while the parser and the graph get faster (issue 24).

The parsed model and every figure (op counts, FLOPs, bytes, fusions, the graph's groups
and first view, the viewer's payload) of the fixtures under ``tests/data/hlo`` and of
generated modules, hashed by `tests._support.hlo_fingerprint` and compared with the hashes the
code gave before issue 24's speed work. A change that alters a number fails here; if
the change is meant (a counting rule fixed), update the hashes in the same commit and
say why.
"""

from __future__ import annotations

import pytest

from benchmarks._large_hlo import large_module
from tests._support.data import HLO_DATA as DATA
from tests._support.hlo_fingerprint import fingerprint
from tests._support.hlo_texts import SCAN, named_module, unnamed_module

GENERATED = {
    "scan16": lambda: SCAN,
    "unnamed_25k": unnamed_module,
    "named_20k": named_module,
    "large_4x300": lambda: large_module(4, 300),
}

#: Hashes from the code before issue 24 (``python -m tests.hlo.test_fingerprint`` prints them).
#: Issue 38 (session 54) changed ``groups`` and ``payload`` of unnamed_25k and named_20k: a nest
#: of more than six stages (`_graph_parts._nest`) sets its heaviest stage apart at its top
#: level, the others in as few stages of stages as keep it as deep; the first view is the same.
#: Issue 38 (session 52) changed ``groups``, ``payload`` and ``view`` of gpu_cudnn_conv: six
#: convolutions too wide to pair in one rank are cut along their data flow, the heaviest stage
#: of them beside a stage of the others, and the first view opens it.
#: Session 51 changed ``cost`` and ``payload`` (which shows FLOPs) of the five modules with
#: convolutions (gpu_cudnn_conv, gpu_vgg19_forward, gpu_command_buffer and its dump copy
#: module_0007, tf_conv_block): a convolution counts only the kernel taps that read a real
#: input element, as XLA's HloCostAnalysis does, not SAME padding's (0.75-16% fewer FLOPs).
#: Issue 38 (session 50) changed ``groups``, ``payload`` and ``view`` of gpu_cublas_gemm,
#: gpu_cudnn_conv, odd_syntax, torch_xla_linear and torch_xla_linear_adam: a group holding less
#: than half of one the first view shows closed (it did not fit) no longer opens.
#: torch_xla_linear_backward.hlo is new in session 47 (issue 38: a stage of stages' header).
#: Issue 38 (session 48) changed ``groups``, ``payload`` and ``view`` of gpu_cudnn_conv,
#: odd_syntax, torch_xla_linear, torch_xla_linear_backward and scan16: the first view's width
#: is the smaller of the slack guess and dagre's make-room rule, the heaviest group anywhere
#: opens first, and a part of parameters and tuple elements never opens.
#: torch_xla_linear_adam.hlo is new.
#: Issue 38 (session 46) changed ``groups``, ``payload`` and ``view`` of gpu_cublas_gemm,
#: gpu_vgg19_forward, scan16, unnamed_25k and named_20k (``groups`` and ``payload`` of odd_syntax,
#: ``payload`` of gpu_cudnn_conv): a long chain of stages is framed on its heaviest stage, which the
#: first view opens; ranks follow the data's direction and pull a source next to its user; a
#: stage of stages is labelled with how many it holds. torch_xla_linear.hlo is new.
#: Issue 38 (session 45) changed ``groups``, ``payload`` and ``view`` again where a group did not
#: fit the first view's frame: its members became stages of its data flow (`_graph_parts`).
#: Issue 38 changed ``groups`` (it holds the first view), ``payload`` (the first view and the
#: ``frame`` it fits) and ``view`` (`view_counts`): the first view opens what fits its frame.
#: Issue 35 changed ``groups`` and ``payload`` of the four modules with named parameters: a
#: parameter is labelled with its argument's path (``x``), where it read ``x.1``.
EXPECTED: dict[str, dict[str, str]] = {
    "dump/module_0003.jit_predict.before_optimizations.txt": {
        "model": "ce26c96d7dc4aca6",
        "ops": "10d5bffc78e53d00",
        "cost": "a02be69de04da786",
        "fusions": "4f53cda18c2baa0c",
        "groups": "7384ae7fa33dec1e",
        "payload": "9272199ac10d7154",
        "view": "ee2b9476ed9d338f",
    },
    "dump/module_0003.jit_predict.cpu_after_optimizations.txt": {
        "model": "6e32db3550e8adf6",
        "ops": "f6e034ba22847b3f",
        "cost": "a6d70c6c748b8371",
        "fusions": "7f26e359fa7a740f",
        "groups": "aa59ba515106191e",
        "payload": "cda557afb85100be",
        "view": "d2bb9d8a2e99bacb",
    },
    "dump/module_0007.jit_train_step.sm_9.0_gpu_after_optimizations.txt": {
        "model": "b60a8fe71a21123f",
        "ops": "d48257b33189f74b",
        "cost": "9b6c8a10ebe5c616",
        "fusions": "a25566d5f116d601",
        "groups": "8c9d2052c4d0faee",
        "payload": "7b274695a19edda8",
        "view": "b429cfba2b04edb7",
    },
    "gpu_command_buffer.hlo": {
        "model": "b60a8fe71a21123f",
        "ops": "d48257b33189f74b",
        "cost": "9b6c8a10ebe5c616",
        "fusions": "a25566d5f116d601",
        "groups": "8c9d2052c4d0faee",
        "payload": "7b274695a19edda8",
        "view": "b429cfba2b04edb7",
    },
    "gpu_cublas_gemm.hlo": {
        "model": "966ff5f0e2d9c7b9",
        "ops": "9d5e847a9d4cb34e",
        "cost": "c07ec958d4481e0e",
        "fusions": "445274e32c8d2deb",
        "groups": "a1b72f8cca521132",
        "payload": "c6f8c80b7c5419c4",
        "view": "b9177d892ba92a03",
    },
    "gpu_cudnn_conv.hlo": {
        "model": "4344eef34d0fb94b",
        "ops": "574dd9a4f8da7b0c",
        "cost": "910634b232e898ac",
        "fusions": "4f53cda18c2baa0c",
        "groups": "9fdf29e8d848c7ba",
        "payload": "5fc118104570f946",
        "view": "eaea8a5749a907fb",
    },
    "gpu_vgg19_forward.hlo": {
        "model": "7bcaf17fff15c70b",
        "ops": "5c9042c2ca88fe03",
        "cost": "42fcfaef3558f10c",
        "fusions": "4f53cda18c2baa0c",
        "groups": "1333362a4ad6baaf",
        "payload": "46d7849f0d5fc52a",
        "view": "9c7154bc1566b9c7",
    },
    "jax_mlp.hlo": {
        "model": "ce26c96d7dc4aca6",
        "ops": "10d5bffc78e53d00",
        "cost": "a02be69de04da786",
        "fusions": "4f53cda18c2baa0c",
        "groups": "7384ae7fa33dec1e",
        "payload": "9272199ac10d7154",
        "view": "ee2b9476ed9d338f",
    },
    "odd_syntax.hlo": {
        "model": "41ffddf00068497b",
        "ops": "7bc883923c34893e",
        "cost": "df4e3109227e30fc",
        "fusions": "4f53cda18c2baa0c",
        "groups": "f52b34f294c28b22",
        "payload": "2c2e67dfba34c539",
        "view": "4e78c6b546d05e8d",
    },
    "spmd_async_collectives.hlo": {
        "model": "ed8c5a8a26214f1e",
        "ops": "6c1af1d0503c670c",
        "cost": "90527b581faa22a3",
        "fusions": "4f53cda18c2baa0c",
        "groups": "fb562ff959c7f7d7",
        "payload": "fc63a2f8b58f2043",
        "view": "fb943933c1673637",
    },
    "tf_conv_block.hlo": {
        "model": "88180efc95b47aef",
        "ops": "7e2af2d659602930",
        "cost": "eb111f8234855e8a",
        "fusions": "8512f8cefb96500f",
        "groups": "3876ff6b9f94dfc2",
        "payload": "70406df7fd0f9f35",
        "view": "b9177d892ba92a03",
    },
    "torch_xla_linear.hlo": {
        "model": "9a07e4998e32fb2d",
        "ops": "c1b8563077016fa9",
        "cost": "1c27d65a036f7d80",
        "fusions": "4f53cda18c2baa0c",
        "groups": "e9cc7e5893624265",
        "payload": "a4a2f5fe111bd97f",
        "view": "9c7154bc1566b9c7",
    },
    "torch_xla_linear_adam.hlo": {
        "model": "b4b03f50c9fa480a",
        "ops": "963789f83348445b",
        "cost": "681a4f727e11abc0",
        "fusions": "4f53cda18c2baa0c",
        "groups": "b487d4239b86bee5",
        "payload": "72b89992f9d0d479",
        "view": "588bae75facf7ef7",
    },
    "torch_xla_linear_backward.hlo": {
        "model": "019037cec29129f0",
        "ops": "8f4eecc4a673dacb",
        "cost": "14ff6ed94e1ba7ed",
        "fusions": "4f53cda18c2baa0c",
        "groups": "cd73ead57e16e670",
        "payload": "8f8df0ec4c51362a",
        "view": "afc247faf314f9cb",
    },
    "scan16": {
        "model": "914c9a116cd545ae",
        "ops": "5bf4a874f3b2a47c",
        "cost": "907502e9503810a5",
        "fusions": "4f53cda18c2baa0c",
        "groups": "968ecc238e753e06",
        "payload": "4493e216e74b17bc",
        "view": "b429cfba2b04edb7",
    },
    "unnamed_25k": {
        "model": "12924e9b2c311c7a",
        "ops": "e503174a15dc2560",
        "cost": "e6aad1e865f7cd65",
        "fusions": "4f53cda18c2baa0c",
        "groups": "ce4bfe913cb0fbd6",
        "payload": "679b2ea854ff83fe",
        "view": "2e96afc0e9b31d97",
    },
    "named_20k": {
        "model": "29ad6a88803e830a",
        "ops": "83fb42790e51cfb5",
        "cost": "cf21a825fc4808bb",
        "fusions": "4f53cda18c2baa0c",
        "groups": "e0a9d946b7255cb1",
        "payload": "8154986a34a3ed13",
        "view": "c60cd1169e2574e9",
    },
    "large_4x300": {
        "model": "45d62cfec4790c46",
        "ops": "c9f7878ef5ddbc71",
        "cost": "e92b9ab69ba13e15",
        "fusions": "02084089e64ea939",
        "groups": "06cc84e4930ec8d4",
        "payload": "4778580387a2430c",
        "view": "935b9e01bcf627f4",
    },
}


def _files() -> list[str]:
    return sorted(
        str(p.relative_to(DATA))
        for p in DATA.rglob("*")
        if p.is_file() and "buffer-assignment" not in p.name
    )


def _text(case: str) -> str:
    return GENERATED[case]() if case in GENERATED else (DATA / case).read_text()


CASES = [*_files(), *GENERATED]


@pytest.mark.parametrize("case", CASES)
def test_figures_are_the_ones_before_the_speed_work(case):
    assert fingerprint(_text(case)) == EXPECTED[case]


def test_every_case_has_its_expected_hashes():
    assert sorted(EXPECTED) == sorted(CASES)


if __name__ == "__main__":
    for case in CASES:
        print(f"    {case!r}: {fingerprint(_text(case))!r},")
