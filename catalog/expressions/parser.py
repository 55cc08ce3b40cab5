"""The SQL-like text form of predicates: ``"userId = 1234 and ts >= '2026-01-01'"``.

Grammar (keywords are case-insensitive)::

    expr      := and_expr ("or" and_expr)*
    and_expr  := not_expr ("and" not_expr)*
    not_expr  := "not" not_expr | "(" expr ")" | predicate     (nested at most MAX_DEPTH deep, see tree.py)
    predicate := name op literal | literal op name
               | name ["not"] "in" "(" literal ("," literal)* ")"
               | name "is" ["not"] "null"
               | name ["not"] "starts" "with" literal | name ["not"] "like" 'prefix%'
    op        := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    literal   := number (exact: a Decimal unless integral) | 'text' | true | false | null | date 'YYYY-MM-DD' | timestamp '...'
    name      := identifier | `any text` | "any text"

The tokenizer is shared with the text form of partition strategies.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions.tree import (
    ALWAYS_TRUE, FLIPPED, RESERVED_WORDS, Expression, Predicate, and_, not_, or_,
)

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<quoted>`(?:[^`]|``)*`|"(?:[^"]|"")*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<punct>[(),\[\]])
""", re.VERBOSE)

_OPS = {"=": "eq", "==": "eq", "!=": "ne", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


@dataclass(frozen=True)
class Token:
    kind: str  # number, string, name, quoted, op, punct, end
    text: str
    position: int

    @property
    def keyword(self) -> str:
        return self.text.lower() if self.kind == "name" else ""


def tokenize(text: str, what: str = "expression") -> list[Token]:
    """Split ``text`` into tokens; raises :class:`ExpressionError` at the first bad character."""
    tokens, position = [], 0
    while position < len(text):
        m = _TOKEN.match(text, position)
        if not m:
            raise ExpressionError(f"cannot parse {what} {text!r}: unexpected {text[position]!r} at position {position}")
        if m.lastgroup != "space":
            tokens.append(Token(m.lastgroup, m.group(), position))
        position = m.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


class TokenStream:
    """Tokens with one-token look-ahead and errors that quote the text and position."""

    def __init__(self, text: str, what: str = "expression"):
        self.text, self.what = text, what
        self.tokens = tokenize(text, what)
        self.index = 0

    @property
    def peek(self) -> Token:
        return self.tokens[self.index]

    def next(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept_keyword(self, *words: str) -> bool:
        if self.peek.keyword in words:
            self.index += 1
            return True
        return False

    def expect(self, text: str) -> Token:
        token = self.next()
        if token.text.lower() != text:
            raise self.error(f"expected {text!r}", token)
        return token

    def error(self, message: str, token: Token | None = None) -> ExpressionError:
        token = token or self.peek
        found = repr(token.text) if token.kind != "end" else "the end"
        return ExpressionError(f"cannot parse {self.what} {self.text!r}: {message}, found {found} at position {token.position}")

    def name(self) -> str:
        token = self.next()
        if token.kind == "name" and token.keyword not in RESERVED_WORDS:
            return token.text
        if token.kind == "quoted":
            quote = token.text[0]
            return token.text[1:-1].replace(quote * 2, quote)
        raise self.error("expected a field name", token)

    def literal(self, exact: bool = False) -> Any:
        """The next literal; with ``exact``, a number with a fraction or exponent is a
        Decimal (so ``x = 1.005`` keeps its digits until it is bound), else a float."""
        token = self.next()
        if token.kind == "number":
            text = token.text
            if re.fullmatch(r"[-+]?\d+", text):
                return int(text)
            return decimal.Decimal(text) if exact else float(text)
        if token.kind == "string":
            return token.text[1:-1].replace("''", "'")
        if token.keyword in ("true", "false"):
            return token.keyword == "true"
        if token.keyword == "null":
            return None
        if token.keyword in ("date", "timestamp") and self.peek.kind == "string":
            text = self.next().text[1:-1]
            try:
                if token.keyword == "date":
                    return dt.date.fromisoformat(text)
                return dt.datetime.fromisoformat(text.replace(" ", "T", 1).replace("Z", "+00:00"))
            except ValueError:
                raise self.error(f"bad {token.keyword} literal {text!r}", token) from None
        raise self.error("expected a literal (number, 'text', true, false, null, date '...')", token)




def parse(text: str) -> Expression:
    """The expression of its text form; an empty text means "every row".

    Chains of ``and`` and ``or`` of any length become one flat node; parentheses and
    ``not`` s may nest without limit while the tree they make stays within
    :data:`~cdkds.catalog.expressions.tree.MAX_DEPTH` levels (``((x = 1))`` is one
    predicate, ``not not x = 1`` is ``x = 1``)."""
    if not isinstance(text, str):
        raise ExpressionError(f"a predicate must be text, got {type(text).__name__}: {text!r:.100}")
    stream = TokenStream(text, "predicate")
    if stream.peek.kind == "end":
        return ALWAYS_TRUE
    expr = _expression(stream)
    if stream.peek.kind != "end":
        raise stream.error("expected 'and', 'or' or the end")
    return expr


@dataclass
class _Group:
    """A parenthesis being read (or the whole text): the ``not`` s before it, the
    disjuncts read so far and the conjuncts of the one being read."""

    nots: int
    disjuncts: list = field(default_factory=list)
    conjuncts: list = field(default_factory=list)


def _expression(s: TokenStream) -> Expression:
    """``expr`` of the grammar, read with a stack of open parentheses rather than by
    recursion, so that neither long chains nor deep nesting exhaust Python's stack."""
    groups = [_Group(0)]
    while True:
        nots = 0
        while s.accept_keyword("not"):
            nots += 1
        if s.peek.text == "(":
            s.next()
            groups.append(_Group(nots))
            continue
        operand = _negated(s, _predicate(s), nots)
        while True:  # the operand ends conjunctions, disjunctions and groups until an operator follows
            group = groups[-1]
            group.conjuncts.append(operand)
            if s.accept_keyword("and"):
                break
            group.disjuncts.append(_combined(s, and_, group.conjuncts))
            group.conjuncts = []
            if s.accept_keyword("or"):
                break
            if len(groups) == 1:
                return _combined(s, or_, group.disjuncts)
            s.expect(")")
            groups.pop()
            operand = _negated(s, _combined(s, or_, group.disjuncts), group.nots)


def _combined(s: TokenStream, combine: Callable[..., Expression], terms: list[Expression]) -> Expression:
    try:
        return combine(*terms)
    except ExpressionError as e:  # nested too deeply: say where
        raise s.error(str(e)) from None


def _negated(s: TokenStream, expr: Expression, nots: int) -> Expression:
    return _combined(s, not_, [expr]) if nots % 2 else expr


def _predicate(s: TokenStream) -> Expression:
    if s.peek.kind in ("number", "string") or s.peek.keyword in ("true", "false", "date", "timestamp"):
        value = s.literal(exact=True)
        op = s.next()
        if op.kind != "op":
            raise s.error("expected a comparison operator", op)
        return Predicate(FLIPPED[_OPS[op.text]], s.name(), value)
    name = s.name()
    token = s.peek
    if token.kind == "op":
        s.next()
        value = s.literal(exact=True)
        if value is None:
            raise s.error(f"comparing {name!r} with null is never true; use 'is null'", token)
        return Predicate(_OPS[token.text], name, value)
    if s.accept_keyword("is"):
        negated = s.accept_keyword("not")
        s.expect("null")
        return Predicate("not_null" if negated else "is_null", name)
    negated = s.accept_keyword("not")
    if s.accept_keyword("in"):
        s.expect("(")
        items = [s.literal(exact=True)]
        while s.peek.text == ",":
            s.next()
            items.append(s.literal(exact=True))
        s.expect(")")
        return Predicate("not_in" if negated else "in", name, values=tuple(items))
    if s.accept_keyword("starts"):
        s.expect("with")
        prefix = s.literal()
        if not isinstance(prefix, str):
            raise s.error("'starts with' needs a 'text' prefix")
        return Predicate("not_starts_with" if negated else "starts_with", name, prefix)
    if s.accept_keyword("like"):
        pattern = s.literal()
        if not isinstance(pattern, str) or not pattern.endswith("%") or any(c in pattern[:-1] for c in "%_"):
            raise s.error(f"only prefix patterns like 'abc%' are supported, got {pattern!r}")
        return Predicate("not_starts_with" if negated else "starts_with", name, pattern[:-1])
    raise s.error(f"expected an operator after {name!r} (=, <, in, is null, starts with...)")
