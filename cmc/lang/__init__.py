"""The model-file language: parse a model file into a frozen Model, evaluate its
properties on worlds. Imports nothing of cmc but cmc.errors: no Linux, no search.

    model = load_model(path, defines)          # ModelError on any problem in the file
    check_binaries(model)                      # after the build step
    check_property(prop, world, next_world)    # -> bool, or EvaluationError
    history_violations(model, world)           # linearizable: the keys that fail
    txn_anomalies(level, world)                # transactional: the anomalies it forbids
"""
from cmc.lang.ast import (BuildDecl, ClientDecl, Expr, Loc, Model, NodeDecl, Property,
                          ReplyDecl, unparse)
from cmc.lang.evaluate import EvaluationError, StateChecks, check_property, evaluate
from cmc.lang.history import (history_rows, history_violations, operation_count, txn_anomalies,
                              txn_count, txn_rows)
from cmc.lang.load import check_binaries, load_model, reply_record

__all__ = [
    "BuildDecl", "ClientDecl", "EvaluationError", "Expr", "Loc", "Model", "NodeDecl",
    "Property", "ReplyDecl", "StateChecks", "check_binaries", "check_property", "evaluate",
    "history_rows", "history_violations", "load_model", "operation_count", "reply_record",
    "txn_anomalies", "txn_count", "txn_rows", "unparse",
]
