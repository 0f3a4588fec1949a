"""Model-file text → statements with located, frozen expressions (docs/model-file.md).

lark parses (grammar.lark: LALR(1), contextual lexer). This module adds what a grammar
cannot say on its own:

- **Continuation lines.** The ``_NL`` token swallows a line break together with the
  blank and comment-only lines after it and the indentation of the next line. If that
  indentation is not empty, the next line continues the statement and the token is
  dropped (``_Continuation``); otherwise it ends the statement.
- **Errors in words.** lark's UnexpectedInput becomes a ModelError at the offending
  character, saying what was found and what would have been accepted there, computed
  exactly from the parser state (``InteractiveParser.accepts``) rather than from LALR's
  merged lookahead sets.
- **Literals.** Strings keep the column of every decoded character, so an error about a
  ``{param}`` or an escape inside a string points at it; regexes are compiled here.

The statements it returns are checked and assembled into a Model by load.py.
"""
from __future__ import annotations

import difflib
import functools
import os
import re
import string
from dataclasses import dataclass

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from cmc.errors import ModelError
from cmc.lang.ast import (Binary, Call, Expr, Field, Index, ListExpr, Literal, Loc, Name,
                          Quantifier, Unary, error_at)
from cmc.lang.statements import (BudgetStmt, BuildStmt, ClientStmt, DiskStmt, JsonBody,
                                 MachineStmt, NetworkStmt, NodeStmt, OpStmt, ParamStmt,
                                 PeersStmt, PropertyStmt, ReplyStmt, ServiceStmt, Statement,
                                 TimeStmt)

STATEMENT_KEYWORDS = ("param", "build", "node", "client", "reply", "network", "disk", "time",
                      "machine", "budget",
                      "invariant", "witness", "quiescent", "action", "eventually", "op",
                      "linearizable", "transactional", "service", "peers")


# --- located source ------------------------------------------------------------------

class Source:
    """The text of one model file, able to make a Loc for any line and column."""

    def __init__(self, file: str, text: str):
        self.file = file
        self.text = text
        self.lines = [line.rstrip("\r") for line in text.split("\n")]

    def loc(self, line: int, col: int) -> Loc:
        line = max(1, min(line, len(self.lines)))
        return Loc(self.file, line, max(col, 1), self.lines[line - 1])

    def at(self, token: Token, offset: int = 0) -> Loc:
        return self.loc(token.line, token.column + offset)

    def end(self) -> Loc:
        return self.loc(len(self.lines), len(self.lines[-1]) + 1)


# --- statements (internal: load.py turns them into the public declarations) -------------

@dataclass(frozen=True)
class Text:
    """A decoded string literal. ``data`` is the bytes it denotes (literal characters
    in UTF-8, ``\\xNN`` as the byte NN); ``cols[i]`` is the column of ``value[i]``."""

    value: str
    data: bytes
    cols: tuple[int, ...]
    loc: Loc
    end_col: int
    source: Source

    def loc_of(self, index: int) -> Loc:
        """Where ``value[index]`` is written; past the end, the closing quote."""
        col = self.cols[index] if index < len(self.cols) else self.end_col
        return self.source.loc(self.loc.line, col)


# --- lark ----------------------------------------------------------------------------

class _Continuation:
    """lark post-lexer: drop the line breaks that lead into an indented line, and give
    every remaining ``_NL`` the position just after the statement it ends, so that
    "unexpected end of line" points at the end of the text rather than past a comment."""

    always_accept = ("_NL",)

    def process(self, stream):
        previous = None
        for token in stream:
            if token.type == "_NL":
                if previous is None or previous.type == "_NL":
                    continue
                next_line = token.value.rsplit("\n", 1)[-1]
                if next_line and not next_line.strip(" \t\f"):
                    continue
                token = _line_end(previous, token.value)
            yield token
            previous = token
        if previous is not None and previous.type != "_NL":
            yield _line_end(previous, "")


def _line_end(previous: Token, value: str) -> Token:
    return Token("_NL", value, start_pos=previous.end_pos, line=previous.end_line,
                 column=previous.end_column, end_line=previous.end_line,
                 end_column=previous.end_column, end_pos=previous.end_pos)


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grammar.lark")
    with open(grammar, encoding="utf-8") as f:
        return Lark(f.read(), parser="lalr", lexer="contextual", postlex=_Continuation(),
                    maybe_placeholders=True, cache=_table_cache())


def _table_cache() -> str | bool:
    """Where lark keeps the grammar's LALR tables between runs (building them takes
    a fifth of a second, more than the rest of loading a model): a file of the
    user's cache directory (docs/cmc.md, "Files cmc writes"), which lark reads only
    when the digest of the grammar, lark's version and Python's that it begins with
    is this run's (else builds the tables and writes the file again; a file it cannot
    read or write, it goes on without). False (built every time) where there is no
    such directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):          # unset, or relative: not to be used (XDG)
        base = os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):          # no home to speak of: not the working directory
        return False
    folder = os.path.join(base, "cmc")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    return os.path.join(folder, "model-grammar.lark-tables")


def parse_source(source: Source) -> list[Statement]:
    """Parse a whole model file. Raises ModelError on the first syntax error."""
    try:
        tree = _lark().parse(source.text)
    except UnexpectedInput as err:
        raise _syntax_error(err, source) from None
    builder = _Builder(source)
    statements = []
    for child in tree.children:
        try:
            statements.append(builder.statement(child))
        except RecursionError:
            raise error_at(source.at(child.children[0]),
                           "this statement is nested too deeply to parse") from None
    return statements


# --- syntax errors in words -----------------------------------------------------------

_WORDS = {
    "_NL": "the end of the line", "$END": "the end of the file",
    "NAME": "a name", "PRIMED": "a primed name", "INT": "a number",
    "STRING": "a string in double quotes", "REGEX": "a regex between slashes (/.../)",
    "TRUE": "true", "FALSE": "false", "NULL": "null", "EQUAL": "'='", "ARROW": "'->'",
    "AFTER": "'after'", "LBRACE": "'{'", "RBRACE": "'}'",
    "COLON": "':'", "COMMA": "','", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['",
    "RSQB": "']'", "DOT": "'.'", "IN": "'in'", "NOT": "'not'", "AND": "'and'", "OR": "'or'",
    "IMPLIES": "'=>'", "ALL": "'all'", "SOME": "'some'", "COMPARE": "a comparison",
    "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'", "PERCENT": "'%'",
}
_EXPRESSION_START = {"INT", "STRING", "NAME", "PRIMED", "LPAR", "LSQB", "MINUS", "TRUE",
                     "FALSE", "NULL", "NOT", "ALL", "SOME"}
_OPERATORS = {"IMPLIES", "OR", "AND", "NOT", "IN", "COMPARE", "PLUS", "MINUS", "STAR",
              "SLASH", "PERCENT", "DOT", "LSQB", "LPAR"}
_STATEMENT_TERMINALS = {word.upper() for word in STATEMENT_KEYWORDS}


def _accepted(err: UnexpectedInput) -> set[str]:
    parser = getattr(err, "interactive_parser", None)
    if parser is not None:
        try:
            return set(parser.accepts())
        except Exception:  # accepts() replays the parser; fall back to lark's own set
            pass
    return set(getattr(err, "expected", None) or getattr(err, "allowed", None) or ())


def _in_words(accepted: set[str]) -> str:
    rest = set(accepted) - {"$END"}
    parts = []
    if rest & _STATEMENT_TERMINALS:
        parts.append("a statement (" + ", ".join(STATEMENT_KEYWORDS) + ")")
        rest -= _STATEMENT_TERMINALS
    if {"NAME", "INT", "STRING"} <= rest:
        parts.append("an expression")
        rest -= _EXPRESSION_START
    if len(rest & {"IMPLIES", "OR", "AND", "COMPARE", "PLUS", "STAR"}) >= 2:
        parts.append("an operator")
        rest -= _OPERATORS
    if "INT" in rest:
        rest.discard("MINUS")
    last = ["the end of the line"] if "_NL" in rest else []
    rest.discard("_NL")
    order = list(_WORDS)
    parts += [_WORDS.get(name, name) for name in sorted(rest, key=lambda n: (
        order.index(n) if n in order else len(order), n))]
    parts += last
    if not parts:
        return "nothing more"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _describe(token: Token) -> str:
    if token.type == "_NL":
        return "end of line"
    if token.type == "$END":
        return "end of file"
    if token.type in ("NAME", "PRIMED"):
        return f"name {token.value}"
    if token.type == "INT":
        return f"number {token.value}"
    if token.type == "STRING":
        return f"string {token.value}"
    if token.type == "REGEX":
        return f"regex {token.value}"
    return f"'{token.value}'"


_UNTERMINATED_REGEX = "unterminated regex: it needs a closing / (write a / inside it as \\/)"


def _syntax_error(err: UnexpectedInput, source: Source) -> ModelError:
    accepted = _accepted(err)
    expected = _in_words(accepted)
    if isinstance(err, UnexpectedCharacters):
        loc = source.loc(err.line, err.column)
        char = err.char
        if char == '"':
            message = ("unterminated string: a string ends on the line where it starts "
                       "(write a line break as \\n)")
        elif char == "/" and "REGEX" in accepted:
            message = _UNTERMINATED_REGEX
        else:
            message = f"unexpected character {char!r}; expected {expected}"
            if char == "'":
                message += " (strings are written in double quotes)"
        return error_at(loc, message)
    token = getattr(err, "token", None)
    if not isinstance(err, UnexpectedToken) or token is None or token.type == "$END":
        return error_at(source.end(), f"unexpected end of file; expected {expected}")
    loc = source.at(token)
    if token.type == "SLASH" and "REGEX" in accepted:
        return error_at(loc, _UNTERMINATED_REGEX)
    if accepted & _STATEMENT_TERMINALS and token.type == "NAME":
        message = (f"unknown statement '{token.value}'; a statement starts with one of: "
                   + ", ".join(STATEMENT_KEYWORDS))
        close = difflib.get_close_matches(token.value, STATEMENT_KEYWORDS, n=1)
        if close:
            message += f" (did you mean {close[0]}?)"
        return error_at(loc, message)
    message = f"unexpected {_describe(token)}; expected {expected}"
    if token.type in ("COMPARE", "IN") and "COMPARE" not in accepted and "AND" in accepted:
        message += " (comparisons do not chain: write a < b and b < c)"
    elif (token.type in _STATEMENT_TERMINALS and token.column > 1
          and not loc.source_line[:token.column - 1].strip()):
        message += (" (an indented line continues the statement above it; start each "
                    "statement at the beginning of its line)")
    return error_at(loc, message)


# --- literals ------------------------------------------------------------------------

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"'}


def decode_string(token: Token, source: Source) -> Text:
    """A STRING token's text, with escapes \\n \\r \\t \\\\ \\" \\xNN."""
    raw = token.value[1:-1]
    first = token.column + 1  # column of raw[0]
    chars, cols, data = [], [], bytearray()
    i = 0
    while i < len(raw):
        char = raw[i]
        if char != "\\":
            chars.append(char)
            cols.append(first + i)
            data += char.encode("utf-8", "surrogatepass")
            i += 1
            continue
        escape = raw[i + 1]  # the STRING pattern guarantees one
        if escape in _ESCAPES:
            chars.append(_ESCAPES[escape])
            cols.append(first + i)
            data += _ESCAPES[escape].encode()
            i += 2
        elif escape == "x" and len(raw) >= i + 4 and all(
                c in string.hexdigits for c in raw[i + 2:i + 4]):
            byte = int(raw[i + 2:i + 4], 16)
            chars.append(chr(byte))
            cols.append(first + i)
            data.append(byte)
            i += 4
        elif escape == "x":
            raise error_at(source.loc(token.line, first + i),
                           "\\x needs two hex digits, as in \\x0a")
        else:
            raise error_at(source.loc(token.line, first + i),
                           f"unknown escape \\{escape} in a string; the escapes are "
                           "\\n \\r \\t \\\\ \\\" and \\xNN")
    return Text("".join(chars), bytes(data), tuple(cols), source.at(token),
                token.column + len(token.value) - 1, source)


def decode_regex(token: Token, source: Source) -> tuple[re.Pattern[str], dict[str, Loc]]:
    """A REGEX token compiled; ``\\/`` stands for ``/``, other escapes go to ``re``."""
    raw = token.value[1:-1]
    first = token.column + 1
    pattern, cols = [], []
    i = 0
    while i < len(raw):
        if raw[i] == "\\":  # the REGEX pattern guarantees a character after it
            pair = raw[i:i + 2]
            text = "/" if pair == "\\/" else pair
        else:
            text = raw[i]
        pattern.append(text)
        cols += [first + i] * len(text)
        i += 2 if raw[i] == "\\" else 1
    text = "".join(pattern)
    try:
        regex = re.compile(text)
    except re.error as err:
        col = cols[err.pos] if err.pos is not None and err.pos < len(cols) else first + len(raw)
        raise error_at(source.loc(token.line, col), f"bad regex: {err.msg}") from None
    except (OverflowError, RecursionError, ValueError) as err:
        raise error_at(source.at(token), f"bad regex: {err}") from None
    group_locs = {}
    for match in re.finditer(r"\(\?P<([^>]*)>", text):
        group_locs.setdefault(match.group(1), source.loc(token.line, cols[match.start()]))
    return regex, group_locs


# --- tree → statements and expressions ----------------------------------------------------

def _tokens(children) -> list[Token]:
    return [child for child in children if isinstance(child, Token)]


class _Builder:
    """Walks lark's tree. Each grammar alias has one method; expressions are always
    Trees (every atom has an alias), tokens are names, keywords and punctuation."""

    def __init__(self, source: Source):
        self.source = source

    def at(self, token: Token) -> Loc:
        return self.source.at(token)

    def integer(self, token: Token) -> int:
        try:
            return int(token.value)
        except ValueError:  # past Python's limit on digits in int(str)
            raise error_at(self.at(token), "this number has too many digits") from None

    # statements

    def statement(self, tree: Tree) -> Statement:
        keyword = tree.children[0]
        head = (keyword.value, self.at(keyword))
        return getattr(self, tree.data)(head, tree.children[1:])

    def param_stmt(self, head, children) -> ParamStmt:
        name, _equal, *value = children
        if value[0].type == "STRING":
            literal = decode_string(value[0], self.source).value
        elif value[0].type in ("TRUE", "FALSE"):
            literal = value[0].type == "TRUE"
        elif value[0].type == "MINUS":
            literal = -self.integer(value[1])
        else:
            literal = self.integer(value[0])
        return ParamStmt(*head, name.value, self.at(name), literal, self.at(value[0]))

    def build_stmt(self, head, children) -> BuildStmt:
        return BuildStmt(*head, decode_string(children[0], self.source))

    def node_stmt(self, head, children) -> NodeStmt:
        name, _equal, *kind, command = children
        return NodeStmt(*head, name.value, self.at(name), decode_string(command, self.source),
                        (kind[0].value, self.at(kind[0])) if kind else None)

    def client_stmt(self, head, children) -> ClientStmt:
        name = children[0]
        after = None
        if children[1].type == "AFTER":
            after = (self.integer(children[2]), children[3].value, self.at(children[2]))
        arrow = next(i for i, c in enumerate(children) if isinstance(c, Token)
                     and c.type == "ARROW")
        target = children[arrow + 1]
        requests = tuple(decode_string(c, self.source) if isinstance(c, Token)
                         else self.json_body(c) for c in children[arrow + 3:]
                         if isinstance(c, Tree) or c.type == "STRING")
        if target.type == "NAME":
            return ClientStmt(*head, name.value, self.at(name), None, requests, after,
                              (target.value, self.at(target)))
        return ClientStmt(*head, name.value, self.at(name), decode_string(target, self.source),
                          requests, after)

    def service_stmt(self, head, children) -> ServiceStmt:
        return ServiceStmt(*head, "".join(c.value for c in children), self.at(children[0]))

    def json_body(self, tree: Tree) -> JsonBody:
        return JsonBody(self.json(tree), self.at(tree.children[0]))

    def json(self, tree: Tree):
        """A JSON value of a request body as Python data."""
        if tree.data == "json_value":
            tree = tree.children[-1] if isinstance(tree.children[-1], Tree) else tree
        if tree.data == "json_object":
            out = {}
            for member in tree.children:
                if not isinstance(member, Tree):
                    continue
                key, _colon, value = member.children
                text = decode_string(key, self.source).value
                if text in out:
                    raise error_at(self.at(key), f"the key {text!r} is in this object twice")
                out[text] = self.json(value)
            return out
        if tree.data == "json_array":
            return [self.json(c) for c in tree.children if isinstance(c, Tree)]
        tokens = [t for t in tree.children if isinstance(t, Token)]
        last = tokens[-1]
        if last.type == "STRING":
            return decode_string(last, self.source).value
        if last.type == "INT":
            return -self.integer(last) if len(tokens) == 2 else self.integer(last)
        return {"TRUE": True, "FALSE": False, "NULL": None}[last.type]

    def reply_stmt(self, head, children) -> ReplyStmt:
        regex, group_locs = decode_regex(children[0], self.source)
        return ReplyStmt(*head, regex, self.at(children[0]), group_locs)

    def network_stmt(self, head, children) -> NetworkStmt:
        return NetworkStmt(*head, children[0].value, self.at(children[0]))

    def disk_stmt(self, head, children) -> DiskStmt:
        kind, *variant = children
        return DiskStmt(*head, kind.value, self.at(kind),
                        variant[0].value if variant else None,
                        self.at(variant[0]) if variant else None)

    def time_stmt(self, head, children) -> TimeStmt:
        kind, *rest = children
        options = tuple((rest[i].value, self.at(rest[i]), self.integer(rest[i + 1]),
                         rest[i + 2].value, self.at(rest[i + 1]))
                        for i in range(0, len(rest), 3))
        return TimeStmt(*head, kind.value, self.at(kind), options)

    def machine_stmt(self, head, children) -> MachineStmt:
        item, value, *unit = children
        if value.type != "INT":             # a word: `machine pids private`
            return MachineStmt(*head, item.value, self.at(item), None, value.value,
                               self.at(value))
        return MachineStmt(*head, item.value, self.at(item), self.integer(value),
                           unit[0].value if unit else None, self.at(value))

    def peers_stmt(self, head, children) -> PeersStmt:
        node, _colon, *rest = children
        return PeersStmt(*head, node.value, self.at(node),
                         tuple((t.value, self.at(t)) for t in rest if t.type == "NAME"))

    def budget_stmt(self, head, children) -> BudgetStmt:
        kind, *value = children
        number = self.integer(value[-1])
        if value[0].type == "MINUS":
            number = -number
        return BudgetStmt(*head, kind.value, self.at(kind), number, self.at(value[0]))

    def op_stmt(self, head, children) -> OpStmt:
        kind, regex = children
        pattern, group_locs = decode_regex(regex, self.source)
        return OpStmt(*head, kind.value, self.at(kind), pattern, self.at(regex), group_locs)

    def linearizable_stmt(self, head, children) -> PropertyStmt:
        return PropertyStmt(*head, children[0].value, self.at(children[0]), None)

    def transactional_stmt(self, head, children) -> PropertyStmt:
        name, *level = children
        text = "".join(t.value for t in level)
        return PropertyStmt(*head, name.value, self.at(name), None, text, self.at(level[0]))

    def property_stmt(self, head, children) -> PropertyStmt:
        name, _colon, expr = children
        return PropertyStmt(*head, name.value, self.at(name), self.expr(expr))

    # expressions

    def expr(self, tree: Tree) -> Expr:
        return getattr(self, "x_" + tree.data)(tree.children)

    def x_binary(self, children) -> Binary:
        left, op, right = children
        return Binary(op.value, self.expr(left), self.expr(right), self.at(op))

    def x_not_in(self, children) -> Binary:
        left, op, _in, right = children
        return Binary("not in", self.expr(left), self.expr(right), self.at(op))

    def x_unary(self, children) -> Unary:
        op, operand = children
        return Unary(op.value, self.expr(operand), self.at(op))

    def x_quantifier(self, children) -> Quantifier:
        kind, var, _in, domain, _colon, body = children
        return Quantifier(kind.value, var.value, self.expr(domain), self.expr(body),
                          self.at(kind))

    def x_field(self, children) -> Field:
        base, _dot, name = children
        return Field(self.expr(base), name.value, self.at(name))

    def x_index(self, children) -> Index:
        base, bracket, key, _close = children
        return Index(self.expr(base), self.expr(key), self.at(bracket))

    def x_call(self, children) -> Call:
        args = tuple(self.expr(c) for c in children[2:-1] if isinstance(c, Tree))
        return Call(children[0].value, args, self.at(children[0]))

    def x_int_literal(self, children) -> Literal:
        return Literal(self.integer(children[0]), self.at(children[0]))

    def x_string_literal(self, children) -> Literal:
        return Literal(decode_string(children[0], self.source).value, self.at(children[0]))

    def x_constant(self, children) -> Literal:
        value = {"true": True, "false": False, "null": None}[children[0].value]
        return Literal(value, self.at(children[0]))

    def x_list_literal(self, children) -> ListExpr:
        items = tuple(self.expr(c) for c in children if isinstance(c, Tree))
        return ListExpr(items, self.at(children[0]))

    def x_parenthesized(self, children) -> Expr:
        return self.expr(children[1])

    def x_name(self, children) -> Name:
        return Name(children[0].value, False, self.at(children[0]))

    def x_primed_name(self, children) -> Name:
        return Name(children[0].value[:-1], True, self.at(children[0]))
