"""Visiting a world by replaying its action sequence from a fresh launch.

A process cannot be restored from bytes, so a world is reached by launching
every node again and applying the same actions. Every world on the way has a
known fingerprint: a mismatch means the program (or cmc) is not deterministic,
and that is reported with the step where the replay diverged (SPEC §3).
"""
from __future__ import annotations

from .model import Model, Step, System


class Nondeterminism(Exception):
    """A replay reached a world whose fingerprint differs from the recorded one."""

    def __init__(self, step: int, label: str | None):
        what = "the initial world" if step == 0 else f"step {step} ({label})"
        super().__init__(f"nondeterminism: replaying the same actions gave a different world "
                         f"at {what}; the program under check (or cmc) is not deterministic")
        self.step = step


def replay(model: Model, keys: list[tuple], fps: list[bytes] | None,
           collect: bool = False) -> tuple[System, list[Step]]:
    """Launch and apply `keys`; check fingerprints against `fps` (one per world,
    the initial one first; worlds past the end of `fps` are not checked). With
    collect, also return the Step of every world."""
    system = model.fresh()
    steps: list[Step] = []
    try:
        if fps is not None and system.fingerprint() != fps[0]:
            raise Nondeterminism(0, None)
        if collect:
            steps.append(Step(None, system.view()))
        for i, key in enumerate(keys, 1):
            label = system.apply(key)
            if fps is not None and i < len(fps) and system.fingerprint() != fps[i]:
                raise Nondeterminism(i, label)
            if collect:
                steps.append(Step(label, system.view(), key))
    except BaseException:
        system.close()
        raise
    return system, steps
