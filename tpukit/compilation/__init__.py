"""Compiling a call for the device, and everything said about the result.

``tpukit.compile`` (``_compiled.py``) turns a function and its arguments' shapes into a
``Compiled``: what the call is (``_signature.py``, ``_call_line.py``, ``_shapes.py``,
``_placement.py`` for meshes and partition specs), what it costs (``_analysis.py``,
``_peaks.py``), how fast it runs (``_timing.py``, ``_sample_data.py``) and where its time
goes (``_profile.py`` and its ``_verdict.py``, from a profiler trace taken by
``_trace_runs.py``, decoded by ``_xspace.py``, its programs in ``_trace_programs.py`` and
each instruction's events in ``_trace_events.py``), how it is shown
(``_summary.py``, ``_plots.py``, ``_diff.py``), the persistent cache
(``_compile_cache.py``) and compile errors at the user's line (``_user_errors.py``).
It reads HLO through the pure ``tpukit.hlo`` layer and reaches devices through
``tpukit.runtime``.
"""
