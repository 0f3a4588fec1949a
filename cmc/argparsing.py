"""The command line's parser and the types of its values, for `cmc` (cli.py) and `cmc
maelstrom` (maelstrom_cmd.py): a bad option is a UsageError (exit 2), never argparse's
own exit."""
from __future__ import annotations

import argparse

from .errors import UsageError


class ArgParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def count(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse
