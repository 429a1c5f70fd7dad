"""Parsed modules by their text, so a second view of one program does not parse it again.

A notebook shows one program several times: its graph, then the profile's graph, then a
diff against another step; each of those reads the module from HLO text (a compiled
object, a profile's trace, a file) and a 60 MB dump takes seconds to parse. `ParsedModules`
remembers each module `parse_hlo` made, weakly, under its text's hash: while anyone holds
the module (a compiled object, a graph), parsing equal text again returns it, with what
was computed on it already (its FLOPs, its graph's groups). Once nothing holds it, it is
freed as before: the cache itself keeps nothing alive.

    >>> from tpukit.hlo import parse_hlo
    >>> text = "HloModule m\\nENTRY e {\\n  ROOT x = f32[] parameter(0)\\n}\\n"
    >>> a = parse_hlo(text)
    >>> parse_hlo(text) is a, parse_hlo(text + " ") is a
    (True, False)

A module is then shared by everyone who parses its text: treat it as read-only (tpukit
does). `PARSED.cache_clear()` forgets them all (the benchmarks parse afresh that way).
"""

from __future__ import annotations

import weakref

from tpukit.hlo.text._model import HloModule


class ParsedModules:
    """Modules by the hash of their text, held weakly; the text is checked on a hit."""

    def __init__(self) -> None:
        self._found: dict[int, weakref.ref[HloModule]] = {}

    def get(self, text: str) -> HloModule | None:
        """The live module parsed from text equal to ``text``, or None."""
        ref = self._found.get(hash(text))
        module = None if ref is None else ref()
        if module is None:
            return None
        kept = module._analysis.get("text")
        return module if kept is text or kept == text else None

    def put(self, text: str, module: HloModule) -> None:
        """Remember ``module`` as the parse of ``text`` while it lives."""
        key = hash(text)
        module._analysis["text"] = text  # (its records point into the text already)
        found = self._found

        def forget(_ref: weakref.ref, key: int = key) -> None:
            if found.get(key) is _ref:
                del found[key]

        found[key] = weakref.ref(module, forget)

    def cache_clear(self) -> None:
        """Forget every module (each is parsed again next time)."""
        self._found.clear()

    def __len__(self) -> int:
        # (a copy: a module freed meanwhile takes its entry out of the dict)
        return sum(1 for ref in list(self._found.values()) if ref() is not None)


#: The one cache `parse_hlo` uses.
PARSED = ParsedModules()
