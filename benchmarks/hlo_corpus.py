"""Real HLO modules from outside, for the first-view harness (`hlo_first_views.py --hlo`).

The modules are PyTorch/XLA programs (BERT, GPT-2, GPT-J, GPT-NeoX, Llama, MLPs, linear
models; data, tensor and pipeline parallel) that the GraphHelper project keeps as HLO text
inside JavaScript files (``const text = `HloModule ...` ``). Nobody here wrote them. They
stay out of this repository: this script copies the ones listed in ``SOURCES`` out of a
local snapshot of each repository (a git directory, e.g. one ``fetch`` made) into
``benchmarks/hlo_corpus/`` (git-ignored), and ``hlo_corpus/sources.md`` says where each
came from (repository, path, commit, the SHA-256 of the text).

    python benchmarks/hlo_corpus.py --git kahfizulkifli/GraphHelper=/work/.mirror/kahfizulkifli+GraphHelper/repo \\
        --git wenboqian/GraphHelper=/work/.mirror/wenboqian+GraphHelper/repo
    python benchmarks/hlo_first_views.py --label corpus --hlo benchmarks/hlo_corpus/*.hlo
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import subprocess

HERE = pathlib.Path(__file__).resolve().parent / "hlo_corpus"

#: (repository, commit, path in it, the file's name here)
SOURCES = [
    ("kahfizulkifli/GraphHelper", "5a32cd42bb2df2df17d74f8490656eb87aa2a0bc", p, n)
    for p, n in (
        ("src/HLO/pbtxt/bert/bert_dp_graph_1.js", "kz_bert_dp_graph_1"),
        ("src/HLO/pbtxt/bert/bert_dp_graph_4.js", "kz_bert_dp_graph_4"),
        ("src/HLO/pbtxt/bert/bert_dp_graph_5.js", "kz_bert_dp_graph_5"),
        ("src/HLO/pbtxt/gpt/gpt2_tp=1.js", "kz_gpt2_tp1"),
        ("src/HLO/pbtxt/gpt/gpt2_tp=8.js", "kz_gpt2_tp8"),
        ("src/HLO/pbtxt/gptj/tp_2.js", "kz_gptj_tp2"),
        ("src/HLO/pbtxt/llama/tp_1.js", "kz_llama_tp1"),
        ("src/HLO/pbtxt/llama/tp_8.js", "kz_llama_tp8"),
        ("src/HLO/pbtxt/llama2/llama2_dp=1_tp=4_pp=2.js", "kz_llama2_tp4_pp2"),
        ("src/HLO/pbtxt/misc/linear.js", "kz_linear"),
        ("src/HLO/pbtxt/misc/sharding_batch.js", "kz_sharding_batch"),
        ("src/HLO/pbtxt/misc/sharding_fsdp.js", "kz_sharding_fsdp"),
        ("src/HLO/pbtxt/misc/sharding_megatron-lm.js", "kz_sharding_megatron"),
        ("src/HLO/pbtxt/mlp/mini_mlp_dp.js", "kz_mini_mlp_dp"),
        ("src/HLO/pbtxt/mlp/mini_mlp_single.js", "kz_mini_mlp_single"),
        ("src/HLO/pbtxt/mlp/mlp_single_final.js", "kz_mlp_single"),
        ("src/HLO/pbtxt/mlp/mlp_dp_final.js", "kz_mlp_dp"),
        ("src/HLO/pbtxt/qwb_linear_model/pp_1_layers_2.js", "kz_linear_pp1_layers2"),
        ("src/HLO/pbtxt/qwb_linear_model/pp_2_layers_2_rank_0.js", "kz_linear_pp2_rank0"),
        ("src/HLO/pbtxt/qwb_linear_model/pp_2_final.js", "kz_linear_pp2"),
    )
] + [
    ("wenboqian/GraphHelper", "239eed73c2461c5a475fb8bf46ff5ec68231a8f9", p, n)
    for p, n in (
        ("src/HLO/pbtxt/gpt2_tp=1_n_layer=2.js", "wq_gpt2_2_layers"),
        ("src/HLO/pbtxt/gptneox_tp=2.js", "wq_gptneox_tp2"),
        ("src/HLO/pbtxt/linear_module_adam.js", "wq_linear_adam"),
        ("src/HLO/pbtxt/linear_module_backward.js", "wq_linear_backward"),
        ("src/HLO/pbtxt/linear_tp=4_pp=8_dp=1.js", "wq_linear_tp4_pp8"),
        ("src/HLO/pbtxt/llama_shard_over_sequence.js", "wq_llama_shard_sequence"),
        ("src/HLO/pbtxt/llama_tp2_golden_result.js", "wq_llama_tp2"),
        ("src/HLO/pbtxt/simple_linear_model.js", "wq_simple_linear"),
        ("src/HLO/pbtxt/bert_pretrain_tp=1_dp=1_pp=1_fwd+bwd.js", "wq_bert_fwd_bwd"),
    )
]

_TEXT = re.compile(r"`\s*(HloModule .*?)`", re.S)


def extract(source: str) -> str:
    """The HLO text of a GraphHelper JavaScript file (its first template literal)."""
    found = _TEXT.search(source)
    if found is None:
        raise ValueError("no `HloModule ...` template literal in the file")
    return found.group(1).strip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git", action="append", default=[], help="owner/name=GIT_DIR")
    args = parser.parse_args()
    git_dirs = dict(item.split("=", 1) for item in args.git)
    HERE.mkdir(exist_ok=True)
    rows, seen = [], {}
    for repo, commit, path, name in SOURCES:
        if repo not in git_dirs:
            continue
        js = subprocess.run(
            ["git", "-C", git_dirs[repo], "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        text = extract(js)
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in seen:
            print(f"{name}: the same text as {seen[digest]}, left out")
            continue
        seen[digest] = name
        (HERE / f"{name}.hlo").write_text(text)
        rows.append(
            f"| {name}.hlo | {repo} | `{path}` | {commit[:12]} | {len(text):,} | {digest[:16]} |"
        )
        print(f"{name}: {len(text):,} chars")
    (HERE / "sources.md").write_text(
        "# Where the corpus's modules come from\n\n"
        "Written by `benchmarks/hlo_corpus.py` (the modules themselves are git-ignored).\n"
        "Each is the HLO text of the file's template literal, stripped, ending in a newline.\n\n"
        "| file | repository | path | commit | chars | sha256 (first 16) |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    )


if __name__ == "__main__":
    main()
