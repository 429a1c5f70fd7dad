"""The notebooks, executed with nbclient in a fresh kernel, small (their parameters cell overridden).

Data comes from the MNIST sample bundled with tpukit (TPUKIT_MNIST=sample): no network.
"""

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("run_notebook", ROOT / "scripts" / "run_notebook.py")
run_notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebook)


def execute(path: Path, tmp_path: Path, monkeypatch, **parameters) -> nbformat.NotebookNode:
    monkeypatch.setenv("TPUKIT_MNIST", "sample")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # the notebooks run on the machine's devices
    notebook = nbformat.read(path, as_version=4)
    run_notebook.inject_parameters(notebook, parameters)
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    return notebook


def outputs_text(notebook: nbformat.NotebookNode) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.extend(str(v) for v in output.get("data", {}).values())
    return "\n".join(parts)


def test_mnist_tutorial_runs_end_to_end(tmp_path, monkeypatch):
    nb = execute(
        ROOT / "notebooks" / "01_mnist_mlp.ipynb",
        tmp_path,
        monkeypatch,
        EPOCHS=2,
        TRAIN_EXAMPLES=4096,
        CHECKPOINT_DIR=str(tmp_path / "ckpt"),
    )
    text = outputs_text(nb)
    assert "Stored as predict_compiled." in text
    assert "Stored as loss_grad_compiled." in text
    assert "was compiled for predict(model" in text  # the refused call explains itself
    assert "tpukit-graph" in text or "<script" in text  # the interactive HLO graph was rendered
    assert "restored model: test accuracy" in text
    assert "image/png" in str(
        [o.get("data", {}).keys() for c in nb.cells for o in c.get("outputs", [])]
    )
    assert any((tmp_path / "ckpt").iterdir())


def test_hlo_tour_runs(tmp_path, monkeypatch):
    nb = execute(
        ROOT / "notebooks" / "02_hlo_tour.ipynb", tmp_path, monkeypatch, BATCH=64, WIDTH=128
    )
    text = outputs_text(nb)
    assert "Stored as selu_layer_compiled." in text and "Stored as rnn_compiled." in text
    assert "while loop ops" in text


def test_install_notebook_checks_without_installing(tmp_path, monkeypatch):
    nb = execute(ROOT / "install" / "colab_install.ipynb", tmp_path, monkeypatch, INSTALL=False)
    text = outputs_text(nb)
    assert "JAX is already installed: keeping it." in text
    assert "tpukit installed" in text
    assert "CPU device" in text


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "notebooks").glob("*.ipynb")) + [ROOT / "install" / "colab_install.ipynb"],
)
def test_every_notebook_has_a_colab_badge_and_a_parameters_cell(path):
    notebook = nbformat.read(path, as_version=4)
    assert "colab.research.google.com" in notebook.cells[0].source
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in notebook.cells)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), (
        "commit notebooks without outputs"
    )


def test_make_demo_runs_the_tutorial():
    makefile = (ROOT / "Makefile").read_text()
    assert "notebooks/01_mnist_mlp.ipynb" in makefile.split("demo:")[1].split("\n\n")[0]
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_vgg19_notebook_runs_small(tmp_path, monkeypatch):
    nb = execute(ROOT / "notebooks" / "03_vgg19.ipynb", tmp_path, monkeypatch, BATCH=2, IMAGE=32)
    text = outputs_text(nb)
    assert "Stored as vgg_forward_compiled." in text
    assert "images/s" in text
    assert "Compiled vgg_grad for" in text
