"""Kite's text forms: Java properties files as ``Properties.load`` reads them, and JEXL
partition expressions as Kite's ``PartitionExpression`` evaluates them."""

from __future__ import annotations

import pytest

from cdkds.catalog.convert.kite_expression import (
    KiteCall, KiteDatasetError, parse_partition_expression, parse_properties,
)


def _load(text: str | bytes) -> dict[str, str]:
    return parse_properties(text if isinstance(text, bytes) else text.encode("latin-1"), "p.properties")


@pytest.mark.parametrize("text, expected", [
    # the examples of the Properties.load javadoc
    ("Truth = Beauty\n", {"Truth": "Beauty"}),
    ("  Truth:Beauty", {"Truth": "Beauty"}),
    ("Truth                    :Beauty\n", {"Truth": "Beauty"}),
    ("fruits                           apple, banana, pear, \\\n"
     "                                 cantaloupe, watermelon, \\\n"
     "                                 kiwi, mango\n", {"fruits": "apple, banana, pear, cantaloupe, watermelon, kiwi, mango"}),
    ("cheeses\n", {"cheeses": ""}),
    ("\\:\\=\n", {":=": ""}),
    # comments: only at the start of a logical line, never continued
    ("# a comment \\\nk=v\n! another\n", {"k": "v"}),
    ("a=b\\\n# not a comment\n", {"a": "b# not a comment"}),
    ("\\\n#x\n", {"#x": ""}),
    # separators and the whitespace around them
    ("k==v", {"k": "=v"}), ("k = = v ", {"k": "= v "}), ("k\t\f:v", {"k": "v"}), ("k v w", {"k": "v w"}),
    ("k\\ e\\=y=1", {"k e=y": "1"}),
    # escapes
    ("k=\\u0041\\u00e9\\t\\n\\r\\f\\b\\\\", {"k": "Aé\t\n\r\fb\\"}),
    ("\\u0041bc=1", {"Abc": "1"}), ("k=\\uD83D\\uDE00", {"k": "😀"}),
    ("k=v\\\\\n", {"k": "v\\"}), ("k=v\\\\\\\n  w", {"k": "v\\w"}),
    ("k=v\\", {"k": "v"}),  # a backslash at the end of the file is dropped
    ("a=1\n\\\n", {"a": "1", "": ""}), ("a=1\n\\\r\n", {"a": "1"}),  # Java reads a \r\n's \n ahead
    ("a=1\n\\\n\n", {"a": "1"}),
    # line ends, blank lines, repeated keys
    ("a=1\r\nb=2\rc=3\n\n   \nd=4", {"a": "1", "b": "2", "c": "3", "d": "4"}),
    ("k=1\nk=2\n", {"k": "2"}),
    ("k=a\\\n\nj=b", {"k": "a", "j": "b"}),
])
def test_java_properties(text, expected):
    assert _load(text) == expected


def test_java_properties_are_latin_1():
    assert _load(b"k=caf\xe9") == {"k": "café"}


@pytest.mark.parametrize("text", ["k=\\u00", "k=\\uXYZW", "k=\\u12"])
def test_malformed_unicode_escapes(text):
    with pytest.raises(KiteDatasetError, match=r"p\.properties, line 1: malformed \\uxxxx"):
        _load(text)


@pytest.mark.parametrize("text, expected", [
    ('hash("userId", "userId_hash", 16)', [KiteCall("hash", ("userId", "userId_hash", 16), 'hash("userId", "userId_hash", 16)')]),
    ('[hash("a", 4),\n year("ts", null)]', [KiteCall("hash", ("a", 4), 'hash("a", 4)'),
                                             KiteCall("year", ("ts", None), 'year("ts", null)')]),
    ("[]", []),
    ("range('n', 'b', -5, 0x10, 010, 7L, 0)", [KiteCall("range", ("n", "b", -5, 16, 8, 7, 0),
                                                         "range('n', 'b', -5, 0x10, 010, 7L, 0)")]),
    (r'identity("a\"b", "c\\d", "e\u0041\n", 1)', [KiteCall("identity", ('a"b', "c\\d", "eA\\n", 1),
                                                                r'identity("a\"b", "c\\d", "e\u0041\n", 1)')]),
    (r"dateFormat('t', 'd', 'yyyy\'x\'\"')", [KiteCall("dateFormat", ("t", "d", "yyyy'x'\\\""),
                                                         r"dateFormat('t', 'd', 'yyyy\'x\'\"')")]),
])
def test_partition_expressions(text, expected):
    assert list(parse_partition_expression(text, "p")) == expected


@pytest.mark.parametrize("text, match", [
    ("", "expected a partition function"),
    ("[hash('a', 4),]", "expected a partition function"),
    ("hash('a', 4) hash('b', 4)", "unexpected 'hash' after the expression"),
    ("hash('a' 4)", r"expected '\)', found '4'"),
    ("hash('a', 08)", "'08' is not a JEXL integer"),
    ("hash('a', -'b')", "expected a number after '-'"),
    ("hash('a', true)", "expected a string, an integer or null"),
    ("ns:hash('a', 4)", "expected '\\(', found ':'|unexpected ':'"),
    ("hash('a\n', 4)", "unexpected \"'\""),
    ("null('a')", "expected a partition function"),
])
def test_bad_partition_expressions(text, match):
    with pytest.raises(KiteDatasetError, match=rf"^p: partitionExpression .* is not a Kite partition expression: {match}"):
        parse_partition_expression(text, "p")
