"""Visiting a world by replaying its action sequence from a fresh launch.

A process cannot be restored from bytes, so a world is reached by launching
every node again and applying the same actions. Every world on the way has a
known fingerprint: a mismatch means the program (or cmc) is not deterministic,
and that is reported with the step where the replay diverged (docs/design.md,
"Replay and nondeterminism").

`--det` goes further: every step the search takes is taken a second time from a
fresh launch, and the two resulting worlds (fingerprint, action label and the
world itself) must agree. That catches a program whose nondeterminism shows only
in worlds the search never replays (at a depth bound, or along a simulation walk).
"""
from __future__ import annotations

import json

from .model import Checked, CopyFailed, Model, Step, System


NOT_KEPT = "no copy of it was kept"     # why a copying search replays a world it found


class Nondeterminism(Exception):
    """A replay reached a world whose fingerprint differs from the recorded one."""

    def __init__(self, step: int, label: str | None, detail: str = "", det: bool = False,
                 why: str | None = None):
        what = "the initial world" if step == 0 else f"step {step} ({label})"
        how = ("running the same step twice from a fresh launch (--det)" if det
               else "replaying the same actions")
        message = (f"nondeterminism: {how} gave a different world at {what}; the program "
                   "under check (or cmc) is not deterministic")
        if detail:
            message += f": {detail}"
        if why:
            message += f" (this world was made again from launch: {why})"
        if det:
            message += (" (the second run was launched with its initial stack shifted: a "
                        "program that reads memory it never wrote, or uses its process id, "
                        "real time or addresses, is caught this way)")
        super().__init__(message)
        self.step = step
        self._init = (step, label, detail, det, why)

    def __reduce__(self):          # carried from a --workers process to the parent
        return (Nondeterminism, self._init)


def replay(model: Model, keys: list[tuple], fps: list[bytes] | None,
           collect: bool = False, observe=None, shift: int = 0, why: str | None = None
           ) -> tuple[System, list[Step]]:
    """Launch and apply `keys`; check fingerprints against `fps` (one per world,
    the initial one first; worlds past the end of `fps` are not checked). With
    collect, also return the Step of every world, with `observe(system)` as its
    output when an observer is given. `shift`: launch as Model.fresh says. `why`: what
    made a search replay a world it would have copied, said by a Nondeterminism."""
    system = model.fresh(shift)
    steps: list[Step] = []
    try:
        fp = system.fingerprint()
        if fps is not None and fp != fps[0]:
            raise Nondeterminism(0, None, why=why)
        if collect:
            steps.append(Step(None, system.view(), fp,
                              observe(system) if observe else None))
        for i, key in enumerate(keys, 1):
            action = system.apply(key)
            if fps is not None and i < len(fps) or collect:
                fp = system.fingerprint()
            if fps is not None and i < len(fps) and fp != fps[i]:
                raise Nondeterminism(i, action.label, why=why)
            if collect:
                steps.append(Step(action, system.view(), fp,
                                  observe(system) if observe else None))
    except BaseException:
        system.close()
        raise
    return system, steps


def take_step(system: System, key: tuple, with_actions: bool = False, close: bool = True):
    """Apply `key`, read the world after it and close the system (unless not
    `close`; on an error it is closed anyway). Returns (label, fingerprint, view)
    and, with_actions, the enabled actions."""
    try:
        label = system.apply(key).label
        out = (label, system.fingerprint(), system.view())
        if with_actions:
            out += (system.actions(),)
    except BaseException:
        system.close()
        raise
    if close:
        system.close()
    return out


def recheck(model: Model, keys: list[tuple], fps: list[bytes], key: tuple, label: str,
            fp: bytes, view: dict) -> None:
    """--det: take the step `key` from the world reached by `keys` once more, from a
    fresh launch in a shifted environment (Model.fresh; the shift cycles through
    DET_SHIFTS with the depth), and require the same label, fingerprint and world,
    on the way and after the step."""
    shift = 1 + len(keys) % DET_SHIFTS
    try:
        system = replay(model, keys, fps, shift=shift)[0]
    except Nondeterminism as e:
        raise explained(model, keys[:e.step], shift) from None
    label2, fp2, view2 = take_step(system, key)
    if label2 != label:
        raise Nondeterminism(len(keys) + 1, label, f"the action was {label2!r} the second time",
                             det=True)
    if fp2 != fp or view2 != view:
        raise explained(model, keys + [key], shift)


DET_SHIFTS = 3      # shifted launches that differ in their low address bits (Model.fresh)


def recheck_initial(model: Model) -> tuple[bytes, dict]:
    """--det: the fingerprint and view of the initial world launched shifted (the
    first shift), to compare with those of the search's own launch."""
    system = model.fresh(1)
    try:
        return system.fingerprint(), system.view()
    finally:
        system.close()


def explained(model: Model, keys: list[tuple], shift: int) -> Nondeterminism:
    """The --det error for the world reached by `keys`, which differed in the
    shifted launch: both runs once more, to say which part of the world differed."""
    runs = []
    for k in (0, shift):
        system, steps = replay(model, keys, None, collect=True, shift=k)
        try:
            runs.append((steps[-1], system.parts()))
        finally:
            system.close()
    (first, parts), (_, parts2) = runs
    return Nondeterminism(len(keys), first.label, difference(parts, parts2), det=True)


def difference(parts_a: list[tuple[str, dict]], parts_b: list[tuple[str, dict]]) -> str:
    """The first field of two worlds' named parts (System.parts) that differs, for a
    person to read."""
    for (name, x), (name2, y) in zip(parts_a, parts_b):
        if name != name2:
            return f"the first run had {name}, the second {name2}"
        for field in x:
            if x[field] != y.get(field):
                where = f"{name}: " if name else ""
                return f"{where}{field} was {_shown(x[field])}, then {_shown(y.get(field))}"
    if len(parts_a) != len(parts_b):
        return f"the worlds have {len(parts_a)} and {len(parts_b)} parts"
    return "the fingerprints differ (a part of the world not shown in the trace)"


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:199] + "…"


def quiescent_at(model: Model, keys: list[tuple], fps: list[bytes] | None,
                 actions: list) -> bool:
    """Quiescent (docs/cmc.md, "Properties: when each is checked"): no DELIVER is
    enabled and every enabled FIRE leads back to the same world. `actions` are the
    world's enabled actions; each FIRE is tried from a fresh replay of `keys`."""
    if any(a.moves_messages for a in actions):
        return False
    for action in actions:
        if not action.fires:
            continue
        system, _ = replay(model, keys, fps)
        try:
            before = system.fingerprint()
            system.apply(action.key)
            after = system.fingerprint()
        finally:
            system.close()
        if after != before:
            return False
    return True


def violated_at_end(model: Model, prop, keys: list[tuple], steps: list[Step], actions: list,
                    suffix_from: int | None = None) -> bool:
    """Whether a replayed behavior (`steps`, reached by `keys`, with `actions` enabled
    at its last world) still violates `prop` the way a search reported it."""
    last = steps[-1].view
    checked = prop.kind.checked
    if prop.kind.reached:                   # a witness: reached nowhere on the way
        return not any(prop.check(step.view, None) for step in steps)
    if checked is Checked.STATE:
        return not prop.check(last, None)
    if checked is Checked.TRANSITION:
        return len(steps) > 1 and not prop.check(steps[-2].view, last)
    if checked is Checked.QUIESCENCE:
        return not prop.check(last, None) and quiescent_at(model, keys, None, actions)
    start = max((suffix_from or 1) - 1, 0)  # liveness: from where the fair schedule began
    return not any(prop.check(step.view, None) for step in steps[start:])


def _count(stats, why: str | None) -> None:
    """A successor taken on a replay for reason `why` (None: by design, not for want
    of a copy)."""
    if stats is not None and why is not None:
        stats.replayed[why] = stats.replayed.get(why, 0) + 1


def steps_by_copy(model, held, keys: list, fps: list, action_keys: list, step, stats=None):
    """--fast: take each of `action_keys` from the world reached by `keys`, on copies
    of `held` (a system at that world, or None); the last action takes `held` itself.
    A world that cannot be copied, or a failed copy, is replayed instead, and a step
    that fails on a copy is taken again on a replay, so that what comes out (also an
    error) is what replay gives. Yields (key, system after the step, step(system,
    key)); the caller closes the system or keeps it."""
    why = None                      # why this world is replayed, not copied
    try:
        for i, key in enumerate(action_keys):
            system, copied = None, False
            if held is not None:
                if i == len(action_keys) - 1:
                    system, held = held, None
                else:
                    try:
                        system = held.fork()
                        copied = system is not None
                        if not copied:
                            why = getattr(held, "not_copied", "") or "cannot be copied"
                    except CopyFailed as e:
                        held, why = None, str(e)
            if system is None:
                system = replay(model, keys, fps, why=why)[0]
                _count(stats, why)
            try:
                result = step(system, key)
            except Exception as e:
                system.close()
                if not (getattr(system, "is_copy", False) or isinstance(e, CopyFailed)):
                    raise
                system, copied = replay(model, keys, fps, why=str(e))[0], False
                _count(stats, str(e))
                result = step(system, key)
            if stats is not None and copied:
                stats.copies += 1
            yield key, system, result
    finally:
        if held is not None:
            held.close()
