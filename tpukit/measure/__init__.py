"""Measuring a compiled program on the device: timing, profiles, traces and peaks.

Imports: ``tpukit.hlo``, ``tpukit.display``, ``tpukit._errors``, ``tpukit._interrupts``.

It runs what it is handed (a call with its arguments ready, the program's optimized
HLO) and never compiles: ``tpukit.compilation`` hands it ``Compiled.timeit``'s and
``Compiled.profile``'s calls. Timing (``_timing.py``) gives a ``TimingResult``;
published device peaks (``_peaks.py``) place it on the roofline. A profile
(``_profile.py``, its one-line ``_verdict.py``) comes from a profiler trace taken by
``_trace_runs.py``, decoded by ``_xspace.py``, its programs found in
``_trace_programs.py`` and each instruction's events in ``_trace_events.py``, with GPU
kernels matched to instructions by ``_gpu_kernels.py`` and to runs by ``_gpu_runs.py``.
"""

from tpukit._errors import ProfileError
from tpukit.measure._peaks import DevicePeak, peak_for
from tpukit.measure._profile import Profile, profile_call
from tpukit.measure._timing import TimingResult, time_call

__all__ = [
    "DevicePeak",
    "Profile",
    "ProfileError",
    "TimingResult",
    "peak_for",
    "profile_call",
    "time_call",
]
