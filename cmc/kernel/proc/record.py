"""Copies of cmc's record of a world (proc/fork.py copies the world itself): pickled and
unpickled in one go, the objects every copy shares by reference."""
from __future__ import annotations

import io
import pickle
import types

from .tap import Tap


# Pickled and unpickled in one go (the C pickler is several times faster than
# copy.deepcopy). Held calls complete through closures over the node and its
# sockets: a closure is pickled as its code (kept in _CODES, this process only)
# and its cells, so that the copy's closures point into the copied world, and two
# closures sharing a cell still share it. The spec is shared; a node is copied
# without its processes' poller (Tasks.__getstate__).
_CODES: dict[int, tuple] = {}


def _make_function(key: int, cells):
    code, globs, name, defaults, kwdefaults = _CODES[key]
    f = types.FunctionType(code, globs, name, defaults, cells)
    f.__kwdefaults__ = kwdefaults
    return f


def _new_cell():
    return types.CellType()


def _fill_cell(cell, value) -> None:
    cell.cell_contents = value


_SHARED: dict[int, object] = {}        # during save/load_record: not copied
_BY_IDENTITY: set[type] = {Tap}         # never copied: a listener, and a Lease (below)


def _shared(key: int):
    return _SHARED[key]


class _WorldPickler(pickle.Pickler):
    # reducer_override, unlike persistent_id, is not called for ints, strs, lists,
    # dicts and tuples: the many small objects of a world pass at C speed.
    def reducer_override(self, obj):
        if id(obj) in _SHARED:
            return _shared, (id(obj),)
        if type(obj) in _BY_IDENTITY:        # a lease and its listener: not copied
            _SHARED[id(obj)] = obj
            return _shared, (id(obj),)
        if type(obj) is types.FunctionType and (obj.__closure__ or "<" in obj.__qualname__):
            key = id(obj.__code__)
            if key not in _CODES:
                _CODES[key] = (obj.__code__, obj.__globals__, obj.__name__, obj.__defaults__,
                               obj.__kwdefaults__)
            return _make_function, (key, obj.__closure__)
        if type(obj) is types.CellType:
            try:
                contents = obj.cell_contents
            except ValueError:                  # an empty cell
                return _new_cell, ()
            return _new_cell, (), contents, None, None, _fill_cell
        return NotImplemented


def save_record(obj, shared: list) -> tuple[bytes, dict[int, object]]:
    """obj pickled, with the objects of `shared` (and those of _BY_IDENTITY types) by
    reference: the bytes and what they refer to. `load_record` makes a deep copy of obj
    from them, as often as asked, while obj is not changed."""
    _SHARED.update((id(o), o) for o in shared)
    try:
        buf = io.BytesIO()
        _WorldPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
        return buf.getvalue(), dict(_SHARED)
    finally:
        _SHARED.clear()


def load_record(saved: tuple[bytes, dict[int, object]]):
    data, refs = saved
    _SHARED.update(refs)
    try:
        return pickle.loads(data)
    finally:
        _SHARED.clear()
