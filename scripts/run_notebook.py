"""Execute a tpukit notebook end to end from a terminal, as `make demo` does.

    python scripts/run_notebook.py notebooks/01_mnist_mlp.ipynb -p EPOCHS=2 -o out/run.ipynb

The cell tagged ``parameters`` is given the ``-p NAME=VALUE`` values (Python literals),
the notebook runs in a fresh kernel on whatever device is here, the text each cell
prints is echoed, and the executed notebook is written (with its plots and HTML) to
``--output`` with an HTML export beside it, signed as Jupyter signs the notebooks it
saves, so JupyterLab opens it trusted (its graphs drawn, its styles kept) for this user.
Exits non-zero at the first failing cell, naming it.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbconvert import HTMLExporter
from nbformat.sign import NotebookNotary


def inject_parameters(notebook: nbformat.NotebookNode, values: dict[str, object]) -> None:
    """Append assignments to the cell tagged ``parameters`` (papermill's convention)."""
    if not values:
        return
    for cell in notebook.cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            lines = [f"{name} = {value!r}" for name, value in values.items()]
            cell.source = (
                cell.source.rstrip() + "\n# injected by run_notebook.py\n" + "\n".join(lines)
            )
            return
    raise SystemExit("error: the notebook has no cell tagged 'parameters' to take -p values.")


def parse_parameter(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise SystemExit(f"error: cannot read -p {text!r}: write NAME=VALUE, e.g. -p EPOCHS=2.")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def echo_outputs(cell: nbformat.NotebookNode) -> None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            sys.stdout.write(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            text = output.get("data", {}).get("text/plain")
            if text and not text.startswith("<"):
                print(text)


def write_executed(notebook: nbformat.NotebookNode, output: Path) -> Path:
    """Write the executed ``notebook`` to ``output``, signed in this user's Jupyter data
    folder (as Jupyter signs what it saves: its outputs are trusted, so JupyterLab runs
    their scripts and keeps their styles), and its HTML export beside it; the export's path."""
    output.parent.mkdir(parents=True, exist_ok=True)
    NotebookNotary().sign(notebook)
    nbformat.write(notebook, output)
    page = output.with_suffix(".html")
    page.write_text(HTMLExporter().from_notebook_node(notebook)[0], encoding="utf-8")
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument(
        "-p", "--parameter", action="append", default=[], help="NAME=VALUE for the parameters cell"
    )
    parser.add_argument("-o", "--output", type=Path, help="where to write the executed notebook")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed per cell")
    args = parser.parse_args(argv)

    notebook = nbformat.read(args.notebook, as_version=4)
    inject_parameters(notebook, dict(parse_parameter(p) for p in args.parameter))
    client = NotebookClient(
        notebook,
        timeout=args.timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(args.notebook.parent)}},
    )
    start = time.perf_counter()
    failed = None
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as exc:
                failed = (index, exc)
                break
            finally:
                echo_outputs(cell)
    if args.output:
        page = write_executed(notebook, args.output)
        print(f"Executed notebook written to {args.output}, and as a web page to {page}")
    if failed:
        index, exc = failed
        print(f"error: cell {index} of {args.notebook} failed:\n{exc}", file=sys.stderr)
        return 1
    print(f"{args.notebook} ran end to end in {time.perf_counter() - start:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
