"""The installer's decisions (tpukit/_install.py) and `python -m tpukit doctor`.

The installer runs end to end in tests/project/test_notebooks.py (the notebook and install.sh
into a fresh venv); here its plan is checked for the cases a CPU machine cannot stage:
a too-old package, a missing one, and a too-old JAX that drives a TPU.
"""

import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

import tpukit
from tpukit import _install

REQUIRED = [Requirement(r) for r in ("jax>=0.7.2", "flax>=0.11.2", "tqdm>=4.67.3")]


def actions(installed, hardware="cpu", backend="cpu"):
    return {r.name: r.action for r in _install.plan(REQUIRED, installed, hardware, backend)}


def test_requirements_come_from_the_installed_metadata_which_is_pyproject():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    wanted = {str(Requirement(r)) for r in pyproject["project"]["dependencies"]}
    assert {str(r) for r in _install.requirements()} == wanted


def test_new_enough_packages_are_kept_missing_installed_old_upgraded():
    installed = {"jax": "0.10.2", "flax": "0.10.0", "tqdm": None}
    assert actions(installed) == {"jax": "kept", "flax": "upgrade", "tqdm": "install"}


def test_a_too_old_jax_that_drives_the_tpu_is_not_replaced_and_the_user_is_told_what_to_run():
    rows = _install.plan(
        REQUIRED, {"jax": "0.6.0", "flax": "0.12.0", "tqdm": "4.67.3"}, "tpu", "tpu"
    )
    (jax_row,) = [r for r in rows if r.name == "jax"]
    assert jax_row.action == "blocked"
    assert 'pip install -U "jax[tpu]>=0.7.2"' in jax_row.advice and "restart" in jax_row.advice
    # the same JAX on a CPU-only machine is simply upgraded
    assert actions({"jax": "0.6.0", "flax": "0.12.0", "tqdm": "4.67.3"})["jax"] == "upgrade"


def test_pip_changes_only_what_is_missing_or_too_old_and_pins_the_rest():
    rows = _install.plan(
        REQUIRED, {"jax": "0.10.2", "flax": "0.10.0", "tqdm": "4.67.3"}, "cpu", "cpu"
    )
    assert _install.pip_arguments(rows, "cpu") == ["flax>=0.11.2"]
    pins = _install.pins(rows)
    assert "jax==0.10.2" in pins and "tqdm==4.67.3" in pins
    assert not any(p.startswith("flax") for p in pins)


def test_an_unreadable_version_counts_as_too_old():
    assert (
        actions({"jax": "0.10.2", "flax": "not-a-version", "tqdm": "4.67.3"})["flax"] == "upgrade"
    )


def test_doctor_stops_at_the_first_failing_step_and_says_what_to_do(monkeypatch):
    """(Every step passing is checked where users meet it: the installers' tests.)"""
    import io

    from tpukit import _doctor

    def broken_zoo(state):
        raise _doctor._StepFailed("the zoo is empty")

    steps = [(n, broken_zoo if n == "zoo" else c, f) for n, c, f in _doctor.STEPS]
    monkeypatch.setattr(_doctor, "STEPS", steps)
    out = io.StringIO()
    assert _doctor.doctor(out) is False
    text = out.getvalue()
    assert "  requirements  ok" in text and "  devices       ok" in text
    assert "  zoo           FAILED  _StepFailed: the zoo is empty" in text
    assert "tpukit does not work yet: the zoo check failed." in text
    assert text.rstrip().splitlines()[-1].startswith("next: ")
    assert "fit" not in text and "tpukit works" not in text


# As install.sh runs it: a plain script whose package cannot be imported (JAX not there yet).
AS_A_SCRIPT = """
import runpy, sys
sys.modules["tpukit"] = None  # any import of the package fails, as before the requirements
sys.path.insert(0, sys.argv[1])  # what `python .../tpukit/_install.py` puts first
found = runpy.run_path(sys.argv[1] + "/_install.py", run_name="installer")
print(issubclass(found["InstallError"], (found["TpukitError"], RuntimeError)))
"""


def test_the_installers_error_is_a_tpukit_error_even_when_it_runs_as_a_plain_script():
    assert issubclass(_install.InstallError, tpukit.TpukitError)
    assert issubclass(_install.InstallError, RuntimeError)
    folder = str(Path(_install.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", AS_A_SCRIPT, folder], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
