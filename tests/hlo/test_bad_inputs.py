"""Bad HLO a user plausibly hands to ``tpukit.hlo.open``, ``diff`` and the plots (issue 19).

Each case is one clear ``TpukitError`` line, never figures of a smaller program read from
cut text, never an internal traceback. The input that used to blow Python's stack (a
3000-deep nested tuple) runs in a child process, so a crash fails that case alone.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import traceback

import pytest

import tpukit
from tpukit import hlo
from tpukit.hlo.text import _progress
from tpukit.hlo.text._progress import progress

# Two computations and a loop-free ENTRY, as XLA writes them (ENTRY last).
WHOLE = """HloModule jit_f, is_scheduled=true

fused_computation {
  param_0 = f32[8,16]{1,0} parameter(0)
  ROOT tanh.0 = f32[8,16]{1,0} tanh(param_0)
}

ENTRY main.5 {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,4]{1,0} parameter(1)
  t = f32[8,16]{1,0} fusion(x), kind=kLoop, calls=fused_computation
  ROOT d = f32[8,4]{1,0} dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
OTHER = (
    WHOLE.replace("jit_f", "jit_g")
    .replace("f32[16,4]", "f32[16,8]")
    .replace("f32[8,4]", "f32[8,8]")
)


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert isinstance(exc, tpukit.TpukitError), f"{type(exc).__name__}: {message}"
    assert "\n" not in message and "Traceback" not in message
    return message


def _refused(text, match: str, **kwargs) -> str:
    with pytest.raises(tpukit.TpukitError, match=match) as info:
        hlo.open(text, **kwargs)
    return _one_line(info.value)


def test_text_without_its_entry_is_refused():
    cut = WHOLE[: WHOLE.index("ENTRY")]
    _refused(cut, "no ENTRY computation.*cut short")


def test_one_line_too_long_to_be_a_path_is_refused_as_text_not_asked_of_the_disk():
    """A long line with no braces could be a file's name, but not past PATH_MAX: it is
    read as text and refused as such (the file system would raise "name too long")."""
    one_line = "x" * 5000
    _refused(one_line, "does not look like HLO text")
    with pytest.raises(tpukit.TpukitError, match="does not look like HLO text") as info:
        hlo.graph(one_line)
    _one_line(info.value)


def test_text_cut_inside_entry_is_refused():
    cut = WHOLE[: WHOLE.index("  ROOT d")]  # ENTRY's last line and closing brace lost
    _refused(cut, "cut short: computation 'main.5' has no closing")


def test_an_instruction_cut_mid_line_is_refused():
    cut = WHOLE[: WHOLE.index("rhs_contracting_dims")]
    _refused(cut, "cut short")


def test_a_line_cut_before_the_closing_brace_is_refused():
    cut = WHOLE.replace("dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}", "dot(t,")
    _refused(cut, "cut mid-line")


def test_a_called_computation_that_is_absent_is_refused():
    start = WHOLE.index("fused_computation {")
    cut = WHOLE[:start] + WHOLE[WHOLE.index("ENTRY") :]
    message = _refused(cut, "calls computation 'fused_computation'")
    assert "incomplete" in message


def test_a_cut_file_is_named_in_the_error(tmp_path):
    path = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    path.write_text(WHOLE[: WHOLE.index("  ROOT d")])
    assert str(path) in _refused(path, "cut short")


def test_a_cut_file_in_a_dump_folder_is_named_when_opened(tmp_path):
    (tmp_path / "module_0001.jit_f.before_optimizations.txt").write_text(WHOLE)
    cut = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    cut.write_text(WHOLE[: WHOLE.index("ENTRY")])
    assert cut.name in _refused(tmp_path, "no ENTRY")


def test_a_3000_deep_nested_tuple_is_one_clear_error():
    code = textwrap.dedent(
        """
        import tpukit
        from tpukit import hlo
        depth = 3000
        shape = "(" * depth + "f32[2]" + ")" * depth
        text = f"HloModule deep\\nENTRY main {{\\n  ROOT p = {shape} parameter(0)\\n}}\\n"
        try:
            hlo.open(text).cost
        except tpukit.TpukitError as exc:
            print("TPUKIT", type(exc).__name__, str(exc).count(chr(10)))
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert "TPUKIT HloTextError 0" in child.stdout, child.stdout + child.stderr[-2000:]


def test_several_modules_in_one_text_are_listed():
    message = _refused(WHOLE + "\n" + OTHER, "holds 2 HLO modules")
    assert "'jit_f'" in message and "'jit_g'" in message and "module=" in message


def test_a_module_name_not_in_the_file_lists_what_is_there():
    message = _refused(WHOLE + "\n" + OTHER, "holds 2 HLO modules", module="jit_h")
    assert "module='jit_h' picks none" in message


def test_a_missing_file_is_one_tpukit_line(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        hlo.open(tmp_path / "nothing_here.txt")
    _one_line(info.value)


def test_an_unreadable_file_is_one_tpukit_line():
    # /proc/self/mem is a regular file whose read fails (EIO), even for root.
    with pytest.raises(
        tpukit.TpukitError, match="Cannot read the HLO file '/proc/self/mem'"
    ) as info:
        hlo.open("/proc/self/mem")
    assert isinstance(info.value, OSError)
    _one_line(info.value)


@pytest.mark.parametrize("source", [b"HloModule m", None, 42])
def test_a_source_of_the_wrong_type_is_one_tpukit_line(source):
    with pytest.raises(TypeError) as info:
        hlo.open(source)
    _one_line(info.value)


def _profile(module):
    return tpukit.Profile(module, {}, {}, name=module.name, device_kind="cpu", runs=1)


def _diff_and_profiles():
    a, b = hlo.open(WHOLE), hlo.open(OTHER)
    return tpukit.diff(a, b), _profile(a.hlo_module()), _profile(b.hlo_module())


def test_diff_graph_refuses_swapped_profiles():
    d, pa, pb = _diff_and_profiles()
    assert d.graph(profiles=(pa, pb)) is not None  # the right order draws
    with pytest.raises(tpukit.TpukitError, match="measured another program.*swapped") as info:
        d.graph(profiles=(pb, pa))
    _one_line(info.value)


def test_diff_graph_refuses_a_third_programs_profile():
    d, pa, _ = _diff_and_profiles()
    third = hlo.open(WHOLE.replace("f32[16,4]", "f32[16,2]").replace("f32[8,4]", "f32[8,2]"))
    with pytest.raises(tpukit.TpukitError, match="measured another program") as info:
        d.graph(profiles=(pa, _profile(third.hlo_module())))
    _one_line(info.value)


@pytest.mark.parametrize("shape", ["one", "bare", "three"])
def test_diff_graph_refuses_a_wrong_count_of_profiles(shape):
    d, pa, pb = _diff_and_profiles()
    given = {"one": (pa,), "bare": pa, "three": (pa, pb, pa)}[shape]
    with pytest.raises(tpukit.TpukitError, match="takes two profiles") as info:
        d.graph(profiles=given)
    _one_line(info.value)


def test_diff_graph_refuses_profiles_of_the_wrong_type():
    d, _, _ = _diff_and_profiles()
    with pytest.raises(tpukit.TpukitError, match="takes tpukit.Profile objects") as info:
        d.graph(profiles=("a.json", "b.json"))
    _one_line(info.value)


def _entry_points(tmp_path):
    (tmp_path / "module_0001.jit_f.before_optimizations.txt").write_text(WHOLE)
    (tmp_path / "module_0002.jit_g.before_optimizations.txt").write_text(OTHER)
    d, pa, _ = _diff_and_profiles()
    return {
        "hlo.open": lambda: hlo.open(tmp_path),
        "diff": lambda: tpukit.diff(hlo.open(WHOLE), "not a program"),
        "HloDiff.graph": lambda: d.graph(profiles=(pa,)),
        "plot_ops": lambda: tpukit.plot_ops(42),
        "hlo.graph": lambda: hlo.graph(tmp_path),
    }


@pytest.mark.parametrize("entry", ["hlo.open", "diff", "HloDiff.graph", "plot_ops", "hlo.graph"])
def test_public_entries_hide_tpukits_frames(tmp_path, entry):
    call = _entry_points(tmp_path)[entry]
    with pytest.raises(tpukit.TpukitError) as info:
        call()
    _one_line(info.value)
    frames = traceback.extract_tb(info.value.__traceback__)
    inside = [f.filename for f in frames if "/tpukit/" in f.filename.replace("\\", "/")]
    # Only the hiding wrapper itself (IPython and pytest hide it too).
    assert all(name.endswith("_errors.py") for name in inside), inside


def test_opening_a_large_module_says_what_it_is_doing(monkeypatch, capsys):
    monkeypatch.setenv("TPUKIT_PROGRESS_AFTER", "0")  # say it at once instead of after 2 s
    program = hlo.open(WHOLE)
    tpukit.diff(program, program)
    err = capsys.readouterr().err
    assert "tpukit: parsing" in err and "MB of HLO" in err and "done in" in err
    assert "tpukit: comparing jit_f and jit_f" in err


def test_a_long_open_made_of_short_steps_still_says_what_it_is_doing(capsys):
    """Steps under one `progress` share its clock: a step shorter than the delay stays
    silent alone, but the open it belongs to says what it does, naming the step."""
    with progress("opening the graph of f", after=0.2):
        with progress("step one", after=0.2):
            time.sleep(0.1)
        with progress("step two", after=0.2):
            _progress._open.lines[0].said.wait(10)  # until the open's clock runs out
    err = capsys.readouterr().err
    assert "tpukit: opening the graph of f (step two)...\n" in err, err
    assert "opening the graph of f done in" in err and "step one" not in err


def test_opening_and_drawing_a_graph_say_what_they_do(monkeypatch, capsys):
    monkeypatch.setenv("TPUKIT_PROGRESS_AFTER", "0")  # say it at once instead of after 2 s
    g = hlo.graph(WHOLE, title="f")
    assert "tpukit: opening the graph of f" in capsys.readouterr().err
    g._repr_html_()
    assert "tpukit: drawing the graph of f" in capsys.readouterr().err


def test_a_cut_file_given_to_graph_is_named_in_the_error(tmp_path):
    path = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    path.write_text(WHOLE[: WHOLE.index("  ROOT d")])
    with pytest.raises(tpukit.TpukitError, match="cut short") as info:
        hlo.graph(path)
    assert str(path) in _one_line(info.value)


@pytest.mark.parametrize("text", ["hello world", "ENTRY"])
def test_text_that_is_not_hlo_is_one_tpukit_line(text):
    with pytest.raises(ValueError, match="does not look like HLO") as info:
        hlo.parse_hlo(text)
    _one_line(info.value)
