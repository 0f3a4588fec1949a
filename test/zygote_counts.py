"""cmc, then one JSON line on stderr: how many nodes it launched and started from a
zygote, and why starts were not kept (docs/design.md, "Zygotes: a start run once"):

    python test/zygote_counts.py CMC-ARGUMENTS...
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cmc.cli import main  # noqa: E402
from cmc.kernel.proc import zygote  # noqa: E402
from cmc.kernel.proc.scheduler import COUNTERS  # noqa: E402

DECLINED: dict = {}


def closing(close):
    def _close(self):
        DECLINED.update(self.declined)
        close(self)
    return _close


if __name__ == "__main__":
    zygote.Zygotes.close = closing(zygote.Zygotes.close)
    status = main(sys.argv[1:])
    print(json.dumps({"launches": COUNTERS["launches"],
                      "zygote starts": COUNTERS["zygote starts"], "declined": DECLINED}),
          file=sys.stderr)
    sys.exit(status)
