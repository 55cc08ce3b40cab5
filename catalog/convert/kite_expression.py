"""The two text forms of a Kite dataset's ``.metadata/descriptor.properties``: the Java
properties file itself, and the JEXL partition expression it holds.

Both are read exactly as Kite reads them: the file by ``java.util.Properties.load`` (an
ISO-8859-1 stream of logical lines), the expression by the subset of JEXL 2 that
``PartitionExpression`` evaluates — one call of a ``PartitionFunctions`` method, or an
array literal of them, with string, integer and ``null`` arguments. Which function each
call stands for is decided by :mod:`cdkds.catalog.convert.kite`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from cdkds.catalog.errors import CdkdsError


class KiteDatasetError(CdkdsError, ValueError):
    """A Kite dataset folder that cannot become a cdkds dataset as it is: its metadata,
    its schema or one of its data files (named in the message)."""


# ---------------------------------------------------------------- Java properties

_BLANK = " \t\f"  # what Properties calls whitespace
_ESCAPED = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}


def parse_properties(data: bytes, where: str) -> dict[str, str]:
    """The key/value pairs of a Java properties file, as Java 8's ``Properties.load(InputStream)``
    reads it (Kite's runtime): ``#``/``!`` comment lines, ``=``, ``:`` or whitespace between key and value,
    a backslash before a line end continues the line (the next line's leading whitespace
    dropped), ``\\uHHHH``, ``\\t``, ``\\n``, ``\\r``, ``\\f`` escapes and a backslash before
    any other character standing for that character; the last of repeated keys wins.
    ``where`` names the file in errors."""
    text = data.decode("latin-1")
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key_end, value_start = _split(line)
        out[_unescape(line[:key_end], where, number)] = _unescape(line[value_start:], where, number)
    return out


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(first line number, logical line)``: comments and blank lines dropped,
    continuations joined, escapes still in place."""
    pieces = re.split(r"(\r\n|\r|\n)", text)
    natural = list(zip(pieces[::2], [*pieces[1::2], ""]))  # (line, its line end)
    if natural[-1][0] == "":
        natural.pop()  # the text after the last line end is no line
    i = 0
    while i < len(natural):
        number = i + 1
        line, end = natural[i][0].lstrip(_BLANK), natural[i][1]
        i += 1
        if not line or line[0] in "#!":
            continue
        parts, ends_file = [], False
        while True:
            backslashes = len(line) - len(line.rstrip("\\"))
            if backslashes % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])  # an odd backslash escapes the line end
            if i == len(natural):
                # the file ends at the escaped line end; Java reads the \n of a \r\n ahead
                ends_file = end != "\r\n"
                break
            line, end = natural[i][0].lstrip(_BLANK), natural[i][1]
            i += 1
        # Java skips a line that is empty once its continuations are joined, unless the file
        # ends right after its escaped line end (an empty key then)
        if any(parts) or ends_file:
            yield number, "".join(parts)


def _split(line: str) -> tuple[int, int]:
    """Where the key ends and the value starts (``Properties.load0``)."""
    key_end, value_start, separator, escaped = 0, len(line), False, False
    while key_end < len(line):
        c = line[key_end]
        if not escaped and c in "=:":
            value_start, separator = key_end + 1, True
            break
        if not escaped and c in _BLANK:
            value_start = key_end + 1
            break
        escaped = c == "\\" and not escaped
        key_end += 1
    while value_start < len(line):
        c = line[value_start]
        if c not in _BLANK:
            if separator or c not in "=:":
                break
            separator = True
        value_start += 1
    return key_end, value_start


def _unescape(raw: str, where: str, number: int) -> str:
    out = []
    i = 0
    while i < len(raw):
        c = raw[i]
        i += 1
        if c != "\\" or i == len(raw):
            out.append(c)
            continue
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i:i + 4]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise KiteDatasetError(f"{where}, line {number}: malformed \\uxxxx escape \\u{digits!s:.4}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPED.get(c, c))
    # \uHHHH escapes are UTF-16 code units: a surrogate pair is one character
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


# ---------------------------------------------------------------- JEXL partition expressions

@dataclass(frozen=True)
class KiteCall:
    """One call of Kite's partition expression: ``hash("id", "id_hash", 16)``."""

    function: str
    args: tuple[Any, ...]
    text: str


_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*')
  | (?P<number>(?:0[xX][0-9A-Fa-f]+|[0-9]+)[lL]?)(?![\w.])
  | (?P<name>[A-Za-z_$][\w$]*)
  | (?P<symbol>[\[\](),\-])
""", re.VERBOSE)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    position: int


def _tokens(text: str, where: str) -> list[_Token]:
    out, position = [], 0
    while position < len(text):
        m = _TOKEN.match(text, position)
        if m is None:
            raise _syntax(where, text, position, f"unexpected {text[position]!r}")
        if m.lastgroup != "space":
            out.append(_Token(m.lastgroup or "", m.group(), position))
        position = m.end()
    out.append(_Token("end", "", len(text)))
    return out


def _syntax(where: str, text: str, position: int, problem: str) -> KiteDatasetError:
    return KiteDatasetError(f"{where}: partitionExpression {text!r} is not a Kite partition expression: "
                            f"{problem} at character {position + 1}")


def parse_partition_expression(text: str, where: str) -> tuple[KiteCall, ...]:
    """The calls of a partition expression: one call (``year("ts", "year")``) or an array
    literal of calls (``[hash("id", "id_hash", 16), year("ts", "year")]``)."""
    tokens = _tokens(text, where)
    reader = _Reader(tokens, text, where)
    if reader.peek.text == "[":
        reader.take("[")
        calls = reader.listed(reader.call, "]")
    else:
        calls = [reader.call()]
    if reader.peek.kind != "end":
        raise reader.error(f"unexpected {reader.peek.text!r} after the expression")
    return tuple(calls)


class _Reader:
    def __init__(self, tokens: list[_Token], text: str, where: str):
        self.tokens, self.text, self.where, self.index = tokens, text, where, 0

    @property
    def peek(self) -> _Token:
        return self.tokens[self.index]

    def error(self, problem: str) -> KiteDatasetError:
        return _syntax(self.where, self.text, self.peek.position, problem)

    def take(self, symbol: str) -> _Token:
        if self.peek.text != symbol:
            found = "the end" if self.peek.kind == "end" else repr(self.peek.text)
            raise self.error(f"expected {symbol!r}, found {found}")
        self.index += 1
        return self.tokens[self.index - 1]

    def listed(self, item: Callable[[], Any], close: str) -> list:
        """Comma-separated ``item``s up to ``close`` (taken too); none before an immediate ``close``."""
        items = []
        if self.peek.text != close:
            items.append(item())
            while self.peek.text == ",":
                self.take(",")
                items.append(item())
        self.take(close)
        return items

    def call(self) -> KiteCall:
        name = self.peek
        if name.kind != "name" or name.text == "null":
            raise self.error("expected a partition function such as hash(\"id\", \"id_hash\", 16)")
        self.index += 1
        self.take("(")
        args = self.listed(self.argument, ")")
        end = self.tokens[self.index - 1]  # the ")" listed took
        return KiteCall(name.text, tuple(args), self.text[name.position:end.position + 1])

    def argument(self) -> Any:
        token = self.peek
        negative = token.text == "-"
        if negative:
            self.index += 1
            token = self.peek
        if token.kind == "number":
            value = _jexl_integer(token.text.rstrip("lL"))
            if value is None:
                raise self.error(f"{token.text!r} is not a JEXL integer")
            self.index += 1
            return -value if negative else value
        if negative:
            raise self.error("expected a number after '-'")
        if token.kind == "string":
            self.index += 1
            return _jexl_string(token.text)
        if token.text == "null":
            self.index += 1
            return None
        raise self.error("expected a string, an integer or null")


def _jexl_integer(digits: str) -> int | None:
    """A JEXL 2 integer literal: decimal, ``0x`` hexadecimal, or octal after a leading 0."""
    try:
        if digits[:2] in ("0x", "0X"):
            return int(digits[2:], 16)
        return int(digits, 8) if len(digits) > 1 and digits[0] == "0" else int(digits)
    except ValueError:
        return None


def _jexl_string(literal: str) -> str:
    """A JEXL 2 string literal's text: ``\\uHHHH``, the quote and the backslash are escapes;
    a backslash before any other character stays (``StringParser.buildString``)."""
    quote, body = literal[0], literal[1:-1]
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            c = body[i + 1]
            if c == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", body[i + 2:i + 6]):
                out.append(chr(int(body[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(c if c in (quote, "\\") else "\\" + c)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
