"""cmc, writing every world it computes the fingerprint of to a file, one per line:

    python test/worlds_dump.py OUT.txt CMC-ARGUMENTS...

For a test that has to say which worlds two runs disagree on (the fingerprint is a
digest of these lines: kernel/world/view.py, `world`)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cmc.cli import main  # noqa: E402
from cmc.kernel.world import view  # noqa: E402


def dumping(out):
    world = view.world

    def _world(cluster):
        w = world(cluster)
        out.write(repr(w) + "\n")
        return w
    return _world


if __name__ == "__main__":
    with open(sys.argv[1], "w") as out:
        view.world = dumping(out)
        status = main(sys.argv[2:])
    sys.exit(status)
