"""Connected pieces of a scope: how `GraphTree` splits a scope used in unconnected places.

A name scope used in several places (one ``relu`` per layer) becomes one group per
connected piece of its ops, so groups follow the data flow (`GraphTree._place`). Ops are
connected by a data edge between them and by an operand they both read (a layer's
backward computes its weight and input gradients from the same output gradient, made
outside it); an operand-less op (parameter, constant) joins nothing itself and goes with
its first user's piece. The tables read are the computation's being grouped, made by
`GraphTree._group_by_scope`: each op's users and its inputs that have operands (an
operand-less one joins nothing), and its operand-less ops.
"""

from __future__ import annotations

from collections import defaultdict


class PiecesMixin:
    """`GraphTree`'s connected pieces of a scope's ops."""

    _users: dict[int, list[int]]
    _inputs: dict[int, list[int]]  # (only those with operands: no source)
    _sources: set[int]

    def _connected_pieces(self, nodes: set[int]) -> list[set[int]]:
        """Connected pieces of ``nodes`` by data edges and by operands they share.

        Two ops reading the same value belong together (a layer's backward computes
        its weight and input gradients from the same output gradient, made outside
        it). Operand-less ops (parameters, constants, iotas) join nothing -- one
        zero constant feeds every ``relu`` -- and go with their first user's piece.
        """
        users, inputs, operand_less = self._users, self._inputs, self._sources
        if len(nodes) == 2:  # (most scopes' pieces: a kernel and its op, an op and its bias)
            return self._pair_pieces(*sorted(nodes))
        sources = nodes & operand_less
        inner = nodes - sources
        if len(inner) == 1:  # (a layer's op and its kernel and bias: nothing to search)
            return self._one_op_pieces(*inner, sources)
        # Each operand (none a source: `inputs` holds no other) -> the ops here reading it:
        # joined when the first of them is reached (an operand read all over, a residual,
        # costs its readers here), or the operand itself, where it is here (its readers
        # here are its users here).
        readers: dict[int, list[int]] = defaultdict(list)
        for node in inner:
            for operand in inputs.get(node, ()):
                readers[operand].append(node)
        pieces: list[set[int]] = []
        piece_of: dict[int, int] = {}
        for start in sorted(inner):
            if start in piece_of:
                continue
            index = piece_of[start] = len(pieces)
            piece, stack = {start}, [start]
            while stack:
                node = stack.pop()
                near = readers.pop(node, [])
                for operand in inputs.get(node, ()):
                    if operand in inner:
                        near.append(operand)
                    near += readers.pop(operand, ())
                for other in near:
                    if other not in piece_of:
                        piece_of[other] = index
                        piece.add(other)
                        stack.append(other)
            pieces.append(piece)
        for source in sorted(sources):
            # (a source has no inputs: its neighbours are its users)
            found = [piece_of[u] for u in users.get(source, ()) if u in piece_of]
            if found:
                pieces[min(found)].add(source)
            else:
                pieces.append({source})
        return pieces

    def _pair_pieces(self, a: int, b: int) -> list[set[int]]:
        """`_connected_pieces` of two ops ``a < b``: one piece when an edge joins them (a
        source only by its own edge) or both read an operand that is no source."""
        users, operand_less = self._users, self._sources
        joined = b in users.get(a, ()) or a in users.get(b, ())
        if a in operand_less or b in operand_less:
            if a in operand_less and b in operand_less:
                joined = False
            # (an inner op's piece comes first, then a source joins it or follows alone)
            return [{a, b}] if joined else ([{a}, {b}] if b in operand_less else [{b}, {a}])
        if not joined:  # (`_inputs` holds no source: any operand both read joins them)
            joined = not set(self._inputs.get(a, ())).isdisjoint(self._inputs.get(b, ()))
        return [{a, b}] if joined else [{a}, {b}]

    def _one_op_pieces(self, op: int, sources: set[int]) -> list[set[int]]:
        """`_connected_pieces` of one op that has operands and ``sources`` (operand-less
        ops): the op's piece, each source it reads in it, any other one a piece alone."""
        piece = {op}
        pieces = [piece]
        users = self._users
        for source in sorted(sources):
            if op in users.get(source, ()):
                piece.add(source)
            else:
                pieces.append({source})
        return pieces
