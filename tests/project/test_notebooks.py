"""The notebooks, executed with nbclient in a fresh kernel, small (their parameters cell overridden).

Data comes from the MNIST sample bundled with tpukit (TPUKIT_MNIST=sample): no network.
"""

import copy
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests._support import lab_review as _lab_review

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("run_notebook", ROOT / "scripts" / "run_notebook.py")
run_notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebook)


def execute(
    path: Path, tmp_path: Path, monkeypatch, kernel_name="python3", **parameters
) -> nbformat.NotebookNode:
    monkeypatch.setenv("TPUKIT_MNIST", "sample")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # the notebooks run on the machine's devices
    notebook = nbformat.read(path, as_version=4)
    run_notebook.inject_parameters(notebook, parameters)
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    return notebook


def outputs_text(notebook: nbformat.NotebookNode) -> str:
    return "\n".join(cell_text(cell) for cell in notebook.cells)


def cell_text(cell: nbformat.NotebookNode) -> str:
    """Everything one cell's outputs say: streams and every representation of each display."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts.extend(str(v) for v in output.get("data", {}).values())
    return "\n".join(parts)


def stderr_text(notebook: nbformat.NotebookNode) -> str:
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stderr" or output.get("output_type") == "error"
    )


def images_per_plot_cell(notebook: nbformat.NotebookNode) -> dict[str, int]:
    """How many images each cell that calls a plot (``.plot(``, ``.plot_ops(``...) shows."""
    return {
        cell.source: sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        for cell in notebook.cells
        if cell.cell_type == "code" and re.search(r"\.plot(_\w+)?\(", cell.source)
    }


def test_mnist_tutorial_runs_end_to_end(colab_run):
    """The tutorial as the install notebook's user runs it next (one run, read by the
    tests of both): small, its checkpoints in a folder of the run's own."""
    nb = colab_run.tutorial
    text = outputs_text(nb)
    assert "Stored as predict_compiled." in text
    assert "Stored as loss_grad_compiled." in text
    assert "was compiled for predict(model" in text  # the refused call explains itself
    assert "tpukit-graph" in text or "<script" in text  # the interactive HLO graph was rendered
    assert "restored model: test accuracy" in text
    # the compile ledger after training: fit's step compiled once, nothing inside its epochs
    assert "fit's step compiled 1 time, " in text
    assert "compiled again inside fit's epochs: none" in text
    assert "by call site" in text and "0 compiled again" in text
    assert "test accuracy" in text and "training speed:" in text and "steps/s" in text
    assert "Compiled predict for CPU" in text  # the compile summary
    # %tpu_profile: the measured tables with the three layers, then the heat graph
    profiled = next(c for c in nb.cells if c.source.startswith("%tpu_profile train_step"))
    shown = " ".join(str(o.get("data", {})) for o in profiled.outputs)
    assert "instructions by time" in shown or "top instructions by time" in shown
    assert "Verdict: the device was busy" in shown  # what bounds the step, first
    assert all(f"layers[{k}] (Linear)" in shown for k in range(3))
    assert "tpukitGraphView" in shown and "time per run" in shown
    memory = next(c for c in nb.cells if c.source.startswith("%tpu_memory train_step"))
    shown = " ".join(str(o.get("data", {})) for o in memory.outputs)
    assert "Memory of train_step" in shown and "Buffers live at the peak" in shown
    assert "<svg" in shown and "layers[0]" in shown
    records = next(c for c in nb.cells if "train_step_profile.table(" in c.source)
    assert "'seconds':" in str(records.outputs[0]["data"]["text/plain"])
    assert "image/png" in str(
        [o.get("data", {}).keys() for c in nb.cells for o in c.get("outputs", [])]
    )
    # the default checkpoint folder is the run's own: two runs at once never share one
    (folder,) = re.findall(r"checkpoints: (\S+)", text)
    assert Path(folder).name.startswith("tpukit-mnist-mlp-") and any(Path(folder).iterdir())
    assert stderr_text(nb) == ""  # progress, restore and warnings: nothing in red
    assert images_per_plot_cell(nb) == {"history.plot();": 1}
    # one line per epoch (EPOCHS=2), each updated in place: tpukit's HTML line, or tqdm's
    # widget where ipywidgets is installed (as on Colab)
    progress = [
        o
        for c in nb.cells
        for o in c.get("outputs", [])
        if "tpukit-progress" in str(o) or "widget-view+json" in str(o.get("data", {}))
    ]
    assert len(progress) == 2, progress
    assert all(str(o["data"]["text/plain"]).count("steps/s") <= 1 for o in progress)
    # each line's time is its epoch's seconds in History (the checkpoint write included)
    lines = [_seconds(str(o["data"]["text/plain"]), r"epoch ") for o in progress]
    fit_cell = next(c for c in nb.cells if "history = tpukit.fit(" in c.source)
    table = next(
        str(o["data"]["text/plain"])
        for o in fit_cell.outputs
        if str(o.get("data", {}).get("text/plain", "")).startswith("History")
    )
    kept = [_seconds(row, r"\s") for row in table.splitlines()[2:] if row.strip()]
    if all(t is not None for t in lines):  # (tqdm's widget, where installed, says no time)
        assert len(lines) == len(kept) == 2, (lines, kept)
        assert all(abs(a - b) <= 0.1 * b for a, b in zip(lines, kept)), (lines, kept)


def _seconds(text: str, before: str) -> float | None:
    """The last ``<number> ms`` or ``<number> s`` after ``before`` in ``text``, in seconds."""
    found = re.findall(before + r"(\d+(?:\.\d+)?) (ms|s)\b", text)
    if not found:
        return None
    value, unit = found[-1]
    return float(value) * (1e-3 if unit == "ms" else 1.0)


def test_hlo_tour_runs(tmp_path, monkeypatch):
    nb = execute(
        ROOT / "notebooks" / "02_hlo_tour.ipynb", tmp_path, monkeypatch, BATCH=64, WIDTH=128
    )
    text = outputs_text(nb)
    assert "Stored as selu_layer_compiled." in text and "Stored as rnn_compiled." in text
    assert "while loop ops" in text
    memory = next(c for c in nb.cells if c.source.endswith("step.memory_view()"))
    shown = " ".join(str(o.get("data", {})) for o in memory.outputs)
    assert "Memory of fit_step" in shown and "Training step at the peak" in shown
    assert "optimizer state" in shown and "<svg" in shown
    assert "selu_layer on " in text and "per run in" in text  # the profile's headline
    # find_nan names the division of the hand-written normalization, at its line
    assert "div made NaN from finite inputs" in text and "jnp.sqrt(variance)" in text
    assert stderr_text(nb) == ""
    # source locations name the cell as the user sees it, not ipykernel's file for it
    selu = next(c for c in nb.cells if c.source.startswith("%%tpu_compile selu_layer"))
    summary = str(selu.outputs[0]["data"]["text/html"])
    assert re.search(rf"In \[{selu.execution_count}\], line [45]<", summary), summary[-1500:]
    assert "ipykernel_" not in summary  # (the graph keeps the full path, in its side panel)
    plots = images_per_plot_cell(nb)
    assert len(plots) == 2 and set(plots.values()) == {1}, plots  # plot_ops(); and plot();
    # newton_sqrt's 20 iterations: all FLOPs at every iteration, XLA's figure is one body
    counted = re.search(
        r"all FLOPs, every iteration: ([\d,]+); XLA's cost analysis \(the body once\): ([\d,]+)",
        text,
    )
    every, once = (int(counted[k].replace(",", "")) for k in (1, 2))
    assert every >= 20 * once > 0, counted[0]
    # ... and the summary's FLOPs line is that count, as executed, with XLA's one body beside it
    newton = next(c for c in nb.cells if c.source.startswith("%%tpu_compile newton_sqrt"))
    shown = cell_text(newton)
    headline = re.search(
        r"FLOPs +(\S+ \S+) +\(dot/conv counted by tpukit: 0 FLOP; "
        r"all FLOPs counted by tpukit: (\S+ \S+); XLA cost analysis: "
        r"\S+ \S+, each loop body once\)",
        shown,
    )
    assert headline and headline[1] == headline[2], shown[:600]
    # the RNN's bytes count every step, as its FLOPs do (one rule: as executed)
    rnn = next(c for c in nb.cells if c.source.startswith("%%tpu_compile rnn"))
    shown = cell_text(rnn)
    assert "counted by tpukit at every loop iteration" in shown, shown[:600]
    # bf16 halves what the arguments and output hold on every device; the rest is the device's
    halved = re.search(r"bf16 / f32 on (.+?): arguments and output x([\d.]+), bytes accessed", text)
    assert halved and float(halved[2]) == 0.5, text[text.find("bf16 / f32") :][:300]


def make_fresh_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A new virtual environment without tpukit that borrows the test environment's other
    packages (jax, ipykernel, pip, setuptools...) through a .pth file: installs into it
    need no network. Also a Jupyter kernel spec that runs in it."""
    monkeypatch.delenv("PYTHONPATH", raising=False)  # nothing may reach tpukit but the install
    venv = tmp_path / "fresh-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    kernels = tmp_path / "jupyter" / "kernels" / "fresh"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "fresh venv",
                "language": "python",
            }
        )
    )
    check = subprocess.run(
        [str(python), "-c", "import tpukit; print(tpukit.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert check.returncode != 0, (
        f"the fresh environment must start without tpukit, found {check.stdout}"
    )
    return venv


@pytest.fixture()
def fresh_venv(tmp_path, monkeypatch):
    return make_fresh_venv(tmp_path, monkeypatch)


class ColabRun:
    """The install notebook, then the tutorial, executed once in one fresh runtime."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch):
        self.venv = make_fresh_venv(folder, monkeypatch)
        monkeypatch.setenv("JUPYTER_PATH", str(folder / "jupyter"))
        self.install = execute(
            ROOT / "install" / "install_tpukit.ipynb",
            folder,
            monkeypatch,
            kernel_name="fresh",
            TPUKIT_SOURCE=str(ROOT),
            PIP_OPTIONS=["--no-index", "--no-build-isolation"],
        )
        self.tutorial = execute(  # CHECKPOINT_DIR left at its default: a folder of the run's own
            ROOT / "notebooks" / "01_mnist_mlp.ipynb",
            folder,
            monkeypatch,
            kernel_name="fresh",
            EPOCHS=2,
            TRAIN_EXAMPLES=4096,
        )


@pytest.fixture(scope="module")
def colab_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        run = ColabRun(tmp_path_factory.mktemp("colab"), monkeypatch)
    yield run
    for folder in re.findall(r"checkpoints: (\S+)", outputs_text(run.tutorial)):
        shutil.rmtree(folder, ignore_errors=True)


def test_make_demos_notebook_opens_trusted_in_jupyterlab_with_graphs_and_tables_drawn(
    colab_run, tmp_path
):
    """The tutorial as ``make demo`` writes it (signed), opened in JupyterLab light and dark
    at 1280 and 1024 px: trusted, every graph drawn, no fallback sentence, the history
    plot shown, no table cut without its own scrollbar, no word broken inside a name.
    Screenshots: out/screenshots/demo_*.png."""
    views = {
        "graph": "%tpu_graph train_step",
        "profile": "%tpu_profile train_step",
        "memory": "%tpu_memory train_step",
        "fit": "# A folder of this run",
    }
    found = _lab_review.review(copy.deepcopy(colab_run.tutorial), tmp_path / "lab", views)
    for view, seen in found.items():
        assert seen["trusted"], (view, seen)
        assert seen["graphs"] == 2 and seen["ready"] == 2, (view, seen)  # %tpu_graph, the profile's
        assert seen["fallbacks"] == 0 and seen["images"] >= 1, (view, seen)
        assert seen["faults"] == [], (view, seen)


def test_install_notebook_then_the_tutorial_in_a_fresh_venv(colab_run):
    """What a Colab user does: the install notebook, then the tutorial, in the same runtime.
    The fresh venv borrows the test environment's packages, so in the oldest lane
    (``make test-oldest``) this is Colab's own stack."""
    text = outputs_text(colab_run.install)
    assert "Keeping the installed JAX: it already uses the CPU." in text
    assert "All of tpukit's requirements are met: nothing was installed." in text
    for step in ("requirements", "zoo", "compile", "fit", "checkpoint", "graph"):
        assert re.search(rf"^  {step} +ok ", text, re.M), f"doctor step {step}: {text[-3000:]}"
    assert "tpukit works: a zoo model compiled, trained, checkpointed and drawn" in text
    assert f"from {colab_run.venv}" in text  # the kernel imports the freshly installed copy
    assert "CPU device" in text and "Stored as check_compiled." in text
    assert "tpukit works in this notebook too" in text
    assert "restored model: test accuracy" in outputs_text(colab_run.tutorial)
    assert stderr_text(colab_run.tutorial) == ""


def run_install_script(fresh_venv: Path, source: Path, cwd: Path) -> subprocess.CompletedProcess:
    """install/install.sh into the fresh venv, run away from the checkout so Python
    imports the installed copy, not the source tree."""
    env = {
        **os.environ,
        "PYTHON": str(fresh_venv / "bin" / "python"),
        "TPUKIT_SOURCE": str(source),
        "PIP_OPTIONS": "--no-index --no-build-isolation",
        "JAX_PLATFORMS": "cpu",
    }
    env.pop("XLA_FLAGS", None)
    return subprocess.run(
        ["sh", str(ROOT / "install" / "install.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=cwd,
    )


def test_install_script_installs_from_the_checkout_into_a_fresh_venv(fresh_venv, tmp_path):
    done = run_install_script(fresh_venv, ROOT, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Keeping the installed JAX: it already uses the CPU." in done.stdout
    assert "tpukit's requirements (from its installed metadata):" in done.stdout
    assert "tpukit works: a zoo model compiled, trained, checkpointed and drawn" in done.stdout


def test_install_script_says_what_to_do_when_the_source_is_wrong(fresh_venv, tmp_path):
    done = run_install_script(fresh_venv, tmp_path / "nowhere", tmp_path)
    assert done.returncode == 1
    assert "error: pip could not install" in done.stderr and "next:" in done.stderr


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "notebooks").glob("*.ipynb")) + [ROOT / "install" / "install_tpukit.ipynb"],
)
def test_every_notebook_has_a_colab_badge_and_a_parameters_cell(path):
    notebook = nbformat.read(path, as_version=4)
    assert "colab.research.google.com" in notebook.cells[0].source
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in notebook.cells)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), (
        "commit notebooks without outputs"
    )


def make_demo_command() -> list[str]:
    """The command ``make demo`` runs, as make reads the Makefile (``-n``: printed, not run;
    ``-o``: the venv's set-up taken as done), with this test's Python as the venv's."""
    done = subprocess.run(
        [
            "make",
            "-s",
            "-n",
            "demo",
            "-o",
            ".venv/.installed",
            f"BIN={Path(sys.executable).parent}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    return shlex.split(line)


def test_make_demo_runs_the_tutorial(tmp_path, monkeypatch):
    """What ``make demo`` runs, run: the tutorial through scripts/run_notebook.py in a fresh
    kernel, small (one epoch on 1,024 examples) and written to a folder of the test's own
    instead of out/ (the last ``-o`` is the one taken)."""
    command = make_demo_command()
    assert "notebooks/01_mnist_mlp.ipynb" in command
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
    monkeypatch.setenv("TPUKIT_MNIST", "sample")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # the notebook runs on the machine's devices
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))  # its signature: not ~
    output = tmp_path / "01_mnist_mlp.ipynb"
    small = ["-p", "EPOCHS=1", "-p", "TRAIN_EXAMPLES=1024", "-o", str(output)]
    done = subprocess.run(command + small, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "notebooks/01_mnist_mlp.ipynb ran end to end in" in done.stdout
    notebook = nbformat.read(output, as_version=4)
    assert "restored model: test accuracy" in outputs_text(notebook)
    assert stderr_text(notebook) == ""
    assert output.with_suffix(".html").is_file()
    for folder in re.findall(r"checkpoints: (\S+)", outputs_text(notebook)):
        shutil.rmtree(folder, ignore_errors=True)


def test_vgg19_notebook_runs_small(tmp_path, monkeypatch):
    nb = execute(ROOT / "notebooks" / "03_vgg19.ipynb", tmp_path, monkeypatch, BATCH=2, IMAGE=32)
    text = outputs_text(nb)
    assert "Stored as vgg_forward_compiled." in text
    assert "images/s" in text
    # the speed in the paper's own units beside its figure: images in seconds, and images/s
    assert re.search(
        r"\b2 images in [\d.e-]+ s: [\d,.]+ images/s \(XLA.jl on a 2018 Cloud TPU: 100 images in 0.23 s, 435 images/s\)",
        text,
    ), text[text.find("images/s") - 300 :][:600]
    assert "Compiled vgg_grad for" in text
    assert stderr_text(nb) == ""
    assert images_per_plot_cell(nb) == {"vgg_forward_compiled.plot_ops();": 1}


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "notebooks").glob("*.ipynb")) + [ROOT / "install" / "install_tpukit.ipynb"],
)
def test_install_instructions_name_the_projects_own_source(path):
    """tpukit is not on the package index: a bare ``pip install tpukit`` installs whatever
    someone else published under that name. Every link into the repository must exist."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    repository = re.search(r'^Repository = "https://github.com/([^"]+)"', pyproject, re.M)[1]
    text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    for target in re.findall(r"pip install\s+(?:-[-\w]+\s+)*([^\s`]+(?: @ [^\s`\"']+)?)", text):
        assert (
            target.startswith(("-e", ".", "$", "{"))
            or f"git+https://github.com/{repository}" in target
        ), f"{path.name}: 'pip install {target}' does not name {repository}"
    for linked in re.findall(rf"github/{re.escape(repository)}/blob/main/([^)\s]+)", text):
        assert (ROOT / linked).exists(), (
            f"{path.name} links {linked}, which is not in the repository"
        )
    for named in re.findall(r"\b((?:install|notebooks)/[\w.-]+\.(?:ipynb|sh))", text):
        assert (ROOT / named).exists(), f"{path.name} names {named}, which is not in the repository"
