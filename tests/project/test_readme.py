"""The README's code blocks, run as written: one fresh kernel, every block a cell, in order.

A ``python`` block is a cell as it stands; an ``sh`` block runs in bash in the kernel's
folder, with this Python first on ``PATH`` (so ``python -m tpukit`` is the tested copy).
The first block (``make demo``, ``make test``) is the set-up, not part of the tour; text
blocks without a language are sample output. The kernel has eight simulated CPU devices,
as the README's tour says, and reads the MNIST sample bundled with tpukit (no network).
Nothing is defined behind the README's back: a block that needs a name gets it from a
block before it.
"""

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def readme_blocks() -> list[tuple[str, str]]:
    """``(language, text)`` of each fenced block of the README, in order."""
    return FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def tour_cells() -> list[str]:
    """The README's runnable blocks as notebook cells: Python as written, sh through bash."""
    blocks = readme_blocks()
    assert blocks[0][0] == "sh" and "make demo" in blocks[0][1] and "make test" in blocks[0][1]
    cells = []
    for language, text in blocks[1:]:
        if language == "python":
            cells.append(text.rstrip("\n"))
        elif language == "sh":
            cells.append(
                "import subprocess\n"
                f"_sh = subprocess.run(['bash', '-ec', {text!r}], capture_output=True, text=True)\n"
                "print(_sh.stdout, _sh.stderr)\n"
                "assert _sh.returncode == 0, f'the sh block failed ({_sh.returncode})'"
            )
        else:
            assert language == "", f"a README block in {language!r}: run it here or say why not"
    return cells


def test_the_readme_opens_with_the_two_setup_commands():
    language, text = readme_blocks()[0]
    commands = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert (language, commands) == ("sh", ["make demo", "make test"])


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    """The README's tour, executed once in a fresh kernel; its cells with their outputs."""
    folder = tmp_path_factory.mktemp("readme")
    env = {
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "TPUKIT_MNIST": "sample",
        "TPUKIT_COMPILE_CACHE": str(folder / "compile-cache"),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        notebook = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(source) for source in tour_cells()]
        )
        NotebookClient(
            notebook,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(folder)}},
        ).execute()
    return notebook.cells


def cell(cells, start: str):
    """The cell whose source starts with ``start`` (exactly one)."""
    (found,) = [c for c in cells if c.source.startswith(start)]
    return found


def text_of(c) -> str:
    return "\n".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs
    )


def test_every_readme_block_runs_as_written_in_one_fresh_kernel(tour):
    for c in tour:  # nbclient stops at the first error; none is shown in red either
        red = [o for o in c.outputs if o.get("output_type") == "error" or o.get("name") == "stderr"]
        assert not red, f"{c.source[:200]}\n-> {red}"
    assert "8 CPU devices" in text_of(cell(tour, "%load_ext tpukit"))
    assert "Stored as predict_compiled." in text_of(cell(tour, "%%tpu_compile predict"))
    assert "Stored as train_step_compiled." in text_of(cell(tour, "%%tpu_compile train_step"))
    assert "median" in text_of(cell(tour, "logits = predict_compiled"))
    assert "HLO diff: f32 (dense) vs bf16 (dense)" in text_of(cell(tour, "def dense"))
    one_compile = cell(tour, "tpukit.diff(f32_compiled, f32_compiled")
    assert "HLO diff: lowered (dense) vs optimized (dense)" in text_of(one_compile)


def test_the_readme_plots_show_in_the_order_called_and_the_roofline_is_placed(tour):
    plots = cell(tour, "predict_compiled.plot_ops(); predict_compiled.plot_roofline()")
    sizes = [o["data"]["text/plain"] for o in plots.outputs if "image/png" in o.get("data", {})]
    assert len(sizes) == 2 and "750x500" in sizes[1], sizes  # ops, then the roofline
    history = cell(tour, "import tempfile")
    assert sum("image/png" in o.get("data", {}) for o in history.outputs) == 1


def test_the_readme_trains_on_tpukits_own_dataset_and_evaluates_it(tour):
    assert "epoch 3/3" in text_of(cell(tour, "import tempfile"))
    scores = text_of(cell(tour, "tpukit.evaluate(mlp, test)"))
    accuracy = float(re.search(r"'accuracy': ([\d.]+)", scores)[1])
    assert 0.8 < accuracy <= 1.0, scores  # 3 epochs on the sample: about 0.9


def test_the_readme_command_line_compiles_the_file_it_shows(tour):
    shown = text_of(
        cell(tour, "import subprocess\n_sh = subprocess.run(['bash', '-ec', 'python -m")
    )
    assert "Compiled predict for CPU" in shown and "predict(x: f32[128,784])" in shown
    assert "8 CPU devices" in shown  # python -m tpukit info
    opened = text_of(cell(tour, "from pathlib import Path"))  # the dump the sh block wrote
    assert "HloProgram 'jit_predict'" in opened and "28 MFLOP" in opened, opened[:500]


def test_no_readme_block_leans_on_a_file_or_folder_it_did_not_make():
    """Absolute paths (/tmp/...) would pass here and fail for a reader who has other files."""
    for language, text in readme_blocks()[1:]:
        if language in ("python", "sh"):
            assert not re.search(r"[\"'=]/tmp/", text), text
