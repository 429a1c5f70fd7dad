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

import bisect
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

    def _whole_scopes(self, trie: dict) -> set[int]:
        """The ``id`` of each scope of ``trie`` (its sub-tries, ``trie`` too) whose ops,
        two or more, are one piece: `_connected_pieces` of them all would give them back as
        one. `GraphTree._place` takes those as they are, with no set of ops to make and
        search at each level of scopes (the scopes of a layer of a large model nest five
        deep: every op was searched five times).

        One pass over the links, each counted once, where the two ops it joins first share
        a scope (their scopes' nearest common one): of an op with operands and its users,
        one link per two next to each other in scope order (an edge, or two users reading
        it: their shared read), so that inside any scope the op and its users there are
        joined by links inside it. Scopes are
        visited inner first, with one union-find over their ops: a scope's pieces are its
        sub-scopes' pieces and its own ops less the links that join two of them. An
        operand-less op joins the piece of a user in the scope, else is a piece alone: a
        scope holding one with no user in it is never whole.
        """
        users, operand_less = self._users, self._sources
        tries: list[dict] = []  # the scopes, depth first (a scope's sub-scopes after it)
        up: list[int] = []  # each one's parent scope (-1 for ``trie``)
        depth: list[int] = []
        scope_of: dict[int, int] = {}
        stack = [(trie, -1, 0)]
        while stack:
            scope, parent, level = stack.pop()
            index = len(tries)
            tries.append(scope)
            up.append(parent)
            depth.append(level)
            if scope[""]:
                scope_of.update(dict.fromkeys(scope[""], index))
            if scope["/"]:  # (most scopes hold none: no generator made for them)
                stack.extend((sub, index, level + 1) for sub in scope["/"].values())

        def common(a: int, b: int) -> int:  # the nearest scope holding scopes a and b
            while a != b:
                if depth[a] >= depth[b]:
                    a = up[a]
                else:
                    b = up[b]
            return a

        links: list[list[tuple[int, int]]] = [[] for _ in tries]  # by their common scope
        alone: set[int] = set()  # scopes holding an operand-less op with no user in them
        find = scope_of.get
        for op in operand_less:
            at = find(op)
            if at is None:  # (an op of a section: not in ``trie``)
                continue
            readers = users.get(op, ())
            if len(readers) == 1 and find(readers[0]) == at:  # (a kernel read where it is)
                continue
            deepest = -1  # the deepest scope holding the op and one of its users
            for user in readers:
                other = find(user)
                if other is not None:
                    deepest = max(deepest, depth[common(at, other)])
            while at >= 0 and depth[at] > deepest:
                alone.add(at)
                at = up[at]
        for op, readers in users.items():
            if op in operand_less:
                continue
            at = find(op)  # (None for an op of a section: not in ``trie``)
            if len(readers) == 1:  # (most ops)
                other = find(readers[0])
                if at is not None and other is not None:
                    links[at if at == other else common(at, other)].append((op, readers[0]))
                continue
            # The op among its users, in scope order: inside any scope, the op and its users
            # there are next to each other, joined by edges and shared reads.
            held = sorted([(s, u) for u in readers if (s := find(u)) is not None])
            if at is not None:
                bisect.insort(held, (at, op))
            for (a, x), (b, y) in zip(held, held[1:]):
                links[a if a == b else common(a, b)].append((x, y))
        leader: dict[int, int] = {}  # union-find over the ops (a root has no entry)
        pieces = [0] * len(tries)
        size = [0] * len(tries)
        whole: set[int] = set()
        for index in range(len(tries) - 1, -1, -1):  # inner scopes first
            own = tries[index][""]
            count = len(own) - len(operand_less.intersection(own))
            for a, b in links[index]:
                top = b
                while top in leader:
                    top = leader[top]
                other = a
                while other in leader:
                    other = leader[other]
                if other != top:
                    leader[other] = top
                    count -= 1
                if a != top:  # (the paths taken shortened to one step)
                    leader[a] = top
                if b != top:
                    leader[b] = top
            pieces[index] += count
            size[index] += len(own)
            parent = up[index]
            if parent >= 0:
                pieces[parent] += pieces[index]
                size[parent] += size[index]
            if pieces[index] == 1 and size[index] > 1 and index not in alone:
                whole.add(id(tries[index]))
        return whole
