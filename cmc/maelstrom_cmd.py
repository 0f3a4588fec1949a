"""`cmc maelstrom` (docs/maelstrom.md, "`cmc maelstrom`"): a Maelstrom user's command
line made a model file of the workload, and the arguments that check it as `cmc
--model-file` would."""
from __future__ import annotations

import os
import shlex
import shutil
import sys

from .argparsing import ArgParser, count
from .check import (BUDGET_FLAGS, DEFAULT_LEVEL, DEFAULT_OPS, LEVELS, NOT_YET, TXN, WORKLOADS,
                    check_horizon, has_phases, model_text)


def maelstrom_argv(argv: list[str]) -> list[str]:
    """`cmc maelstrom WORKLOAD --bin CMD [--node-count N] [--ops N] [--write-model FILE]
    [options]`, or as Maelstrom spells it, `cmc maelstrom test -w WORKLOAD --bin CMD ...`
    (docs/maelstrom.md): write the workload's model (to FILE, by default
    maelstrom-WORKLOAD.model here; a different file already there only with --force)
    and return the arguments that check it (the other options, as for any model; the
    run's outputs kept under store/ as Maelstrom keeps them, unless --out says where). A
    word of CMD that names a file here is written relative to the model's directory
    ({model_dir}), so the model runs it from wherever the two are kept together."""
    if argv[:1] == ["test"]:                # Maelstrom's own subcommand
        argv = argv[1:]
    # The workload named first, if it is (not by argparse: a cmc option's value after
    # `test -w W`, as in --max-memory 4G, would be taken for it)
    named = argv[0] if argv and not argv[0].startswith("-") else None
    argv = argv[1:] if named is not None else argv
    p = ArgParser(prog="cmc maelstrom", usage="cmc maelstrom [test] WORKLOAD | -w WORKLOAD "
                  "--bin CMD [options]", description="Check Maelstrom nodes on one of its "
                  "workloads (" + ", ".join(WORKLOADS) + "; docs/maelstrom.md); other "
                  "options are cmc's.")
    p.add_argument("-w", "--workload", dest="w", choices=WORKLOADS + NOT_YET,
                   metavar="WORKLOAD", help="the workload, as Maelstrom's -w names it")
    p.add_argument("--bin", required=True, metavar="CMD", help="the node's command")
    p.add_argument("--node-count", type=count(1), default=2, metavar="N")
    p.add_argument("--ops", type=count(1), metavar="N",
                   help="how many operations the clients send (default: 1 for broadcast "
                   "and g-set, whose values go to every node; 2 for the others)")
    p.add_argument("--write-model", metavar="FILE",
                   help="where the model goes (default maelstrom-WORKLOAD.model)")
    p.add_argument("--force", action="store_true",
                   help="write the model over a different file already there")
    for kind, what in (("crash", "node crashes (each relaunches the node, which gets init "
                        "again)"), ("drop", "lost messages (default 1 where messages go "
                        "between nodes or to a service)"), ("dup", "duplicated messages")):
        p.add_argument(f"--{kind}", type=count(0), metavar="N", help=f"how many {what}")
    p.add_argument("--horizon", metavar="D", help="how long virtual time runs (e.g. 4s; "
                   "later than the final reads)")
    p.add_argument("--nemesis", metavar="KINDS", help="Maelstrom's faults: partition (a "
                   "lost message, --drop 1 unless given), kill (--crash 1 unless given)")
    p.add_argument("--time-limit", type=count(0), metavar="S", help="seconds of the "
                   "virtual clock in which faults may happen, as in Maelstrom's time limit "
                   "(default 3 for broadcast and g-set, 1 for the others)")
    p.add_argument("--recovery", type=count(0), metavar="S", help="seconds the nodes have "
                   "to recover after the time limit, before the final reads (default 10, "
                   "Maelstrom's)")
    p.add_argument("--consistency-models", metavar="LEVEL", help="txn workloads: the "
                   "consistency level checked (" + ", ".join(LEVELS) + "; default "
                   f"{DEFAULT_LEVEL}, as Maelstrom's)")
    p.add_argument("--availability", metavar="total", help="txn workloads: total, every "
                   "transaction must be acknowledged")
    p.add_argument("--rate", metavar="X", help="Maelstrom's; cmc takes every order of "
                   "--ops operations instead (said on stderr)")
    ours, rest = p.parse_known_args(argv)
    if named is not None and named not in WORKLOADS + NOT_YET:
        p.error(f"argument WORKLOAD: invalid choice: {named!r} (choose from "
                + ", ".join(repr(w) for w in WORKLOADS) + ")")
    ours.workload = named
    if ours.workload and ours.w and ours.workload != ours.w:
        p.error(f"two workloads: {ours.workload} and -w {ours.w}")
    ours.workload = ours.workload or ours.w
    if ours.workload is None:
        p.error("a workload is needed (cmc maelstrom WORKLOAD, or test -w WORKLOAD): "
                + ", ".join(WORKLOADS))
    if ours.workload in NOT_YET:
        p.error(f"{ours.workload} has no model of its own yet: write its clients and "
                "properties in a model file (docs/maelstrom.md, \"The workloads\")")
    for kind in (ours.nemesis or "").replace(",", " ").split():
        if kind not in ("partition", "kill"):
            p.error(f"--nemesis {kind}: cmc's faults are partition (lost messages) and "
                    "kill (crashes); Maelstrom's pause has no counterpart")
        flag = "drop" if kind == "partition" else "crash"
        if getattr(ours, flag) is None:
            setattr(ours, flag, 1)
    txn = ours.workload in TXN
    if ours.consistency_models is not None and (not txn or ours.consistency_models
                                                not in LEVELS):
        p.error(f"--consistency-models {ours.consistency_models}: "
                + ("one of " + ", ".join(LEVELS) if txn else
                   "only the txn workloads have a consistency level"))
    if ours.availability is not None and (not txn or ours.availability != "total"):
        p.error(f"--availability {ours.availability}: cmc checks --availability total, "
                "of the txn workloads (every transaction acknowledged)")
    if ours.rate is not None:
        print("cmc maelstrom: --rate is Maelstrom's way to space a random test's "
              "operations; cmc takes every order of --ops operations instead "
              "(docs/maelstrom.md)", file=sys.stderr)
    if not has_phases(ours.workload):
        for flag in ("time_limit", "recovery"):
            if getattr(ours, flag) is not None:
                print(f"cmc maelstrom: --{flag.replace('_', '-')} has nothing to bound in "
                      f"{ours.workload}, whose network loses nothing and which has no final "
                      "reads (docs/maelstrom.md)", file=sys.stderr)
                setattr(ours, flag, None)
    path = ours.write_model or f"maelstrom-{ours.workload}.model"
    home = os.path.dirname(os.path.abspath(path))
    try:
        words = [_from_model_dir(w, home) for w in shlex.split(ours.bin)]
    except ValueError as e:
        p.error(f"--bin {ours.bin!r}: {e}")
    if not words:
        p.error("--bin is empty")
    if ours.horizon is not None and (why := check_horizon(ours.workload, ours.horizon,
                                                          ours.time_limit, ours.recovery)):
        p.error(why)
    _warn_if_shim(words[0])
    budgets = {kind: getattr(ours, kind) for kind in BUDGET_FLAGS
               if getattr(ours, kind) is not None}
    command = " ".join(MODEL_DIR + shlex.quote(w[len(MODEL_DIR):]) if w.startswith(MODEL_DIR)
                       else shlex.quote(w) for w in words)
    text = model_text(ours.workload, command, ours.node_count,
                      ours.ops or DEFAULT_OPS.get(ours.workload, 2), budgets, ours.horizon,
                      ours.time_limit, ours.recovery, ours.consistency_models,
                      ours.availability == "total")
    try:
        with open(path, encoding="utf-8") as f:
            there = f.read()
    except OSError:
        there = None
    if there is not None and there != text and not ours.force:
        p.error(f"{path} is there already, and is not this model (edited?): --force "
                "writes over it, --write-model FILE writes elsewhere")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        p.error(f"cannot write the model to {path}: {e.strerror}")
    print(f"cmc maelstrom: the model is {path} (edit it; cmc --model-file {path} checks it "
          "again)", file=sys.stderr)
    if not any(a == "--out" or a.startswith("--out=") for a in rest):
        rest = ["--out", "store", *rest]    # Maelstrom's store/, a folder per run
    rest = ["--out-test", ours.workload, *rest]     # store/WORKLOAD/TIME, as Maelstrom's
    return ["--model-file", path, *rest]


MODEL_DIR = "{model_dir}/"


def _from_model_dir(word: str, home: str) -> str:
    """A word of a node's command: a relative path to a file here is written from the
    model's directory, `home` ({model_dir}/...); any other word as it is."""
    if os.path.isabs(word) or not os.path.exists(word):
        return word
    return MODEL_DIR + os.path.relpath(os.path.abspath(word), home)


SHIMS = ("/shims/", "/.volta/bin/")   # pyenv, rbenv, asdf; Volta


def _warn_if_shim(program: str) -> None:
    """A node's program that is a version manager's shim (a script that picks the
    interpreter at each start) runs, and is searched, at every launch: say so."""
    found = shutil.which(program) if "/" not in program else program
    if found and any(mark in found for mark in SHIMS):
        print(f"cmc maelstrom: {program} is a version manager's shim ({found}): it runs at "
              "every launch of every node; naming the interpreter itself is faster",
              file=sys.stderr)
