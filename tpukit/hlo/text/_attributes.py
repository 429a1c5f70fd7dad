"""Split the ``key=value`` attributes after an instruction's operands.

``, lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="a/b"}`` gives
``{"lhs_contracting_dims": "{1}", "rhs_contracting_dims": "{0}", "metadata": '{op_name="a/b"}'}``:
values stay raw strings, split at the commas outside brackets and strings
(`_brackets.split_top`). A piece that is not ``key=value`` is kept under the key ``""``
(pieces joined by ``", "``), so nothing in the text is lost. The parser reads the
called computations and the metadata itself; `HloInstruction.attributes` calls
`split_attributes` only when someone asks, since most attributes are never read.

    >>> split_attributes('dimensions={0}, to_apply=%add, odd')
    {'dimensions': '{0}', 'to_apply': '%add', '': 'odd'}
"""

from __future__ import annotations

from collections.abc import Iterator
from sys import intern

from tpukit.hlo.text._brackets import split_top


def attribute_pairs(rest: str) -> Iterator[tuple[str, str]]:
    """``(key, value)`` of each top-level piece of ``rest``; ``("", piece)`` for odd pieces."""
    for part in split_top(rest):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key.replace("_", "").replace("-", "").isalnum():
            yield "", part
        else:  # a module repeats a few dozen keys: one string each (a dot's dict holds five)
            yield intern(key), value.strip()


def split_attributes(rest: str) -> dict[str, str]:
    """The attributes of ``rest`` as a dict of raw strings (the last of a repeated key wins)."""
    attributes: dict[str, str] = {}
    for key, value in attribute_pairs(rest):
        if key:
            attributes[key] = value
        else:
            attributes[""] = (attributes.get("", "") + ", " + value).lstrip(", ")
    return attributes
