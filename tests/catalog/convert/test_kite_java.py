"""cdkds against Java itself: the values Kite computed (hash buckets of String, Avro Utf8,
Long and Integer; calendar fields and their path text; SimpleDateFormat; fixed-size
ranges; URLEncoder) and the properties files it read, from a JVM running KiteTruth.java.
Skipped where no JDK is installed."""

from __future__ import annotations

import base64
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cdkds.catalog.convert.kite import KiteDatasetError, _utf8_hash
from cdkds.catalog.convert.kite_expression import parse_properties
from cdkds.catalog.partitioning import make_function
from tests.catalog.convert.kite_layouts import julian_month, kite_fixed_range, url_encode

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    """``java(requests)``: Java's answers to ``[(kind, arg, ...)]``, one JVM for all."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK")
    folder = tmp_path_factory.mktemp("java")
    shutil.copy(Path(__file__).parent / "KiteTruth.java", folder)
    subprocess.run(["javac", "-d", str(folder), str(folder / "KiteTruth.java")], check=True, capture_output=True,
                   timeout=120)

    def ask(requests: list[tuple]) -> list[list[str]]:
        lines = ["\t".join([kind, *(base64.b64encode(str(a).encode()).decode() for a in args)])
                 for kind, *args in requests]
        done = subprocess.run(["java", "-cp", str(folder), "KiteTruth"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, check=True, timeout=120)
        answers = done.stdout.split("\n")[:-1]
        assert len(answers) == len(requests), done.stderr
        return [[base64.b64decode(x).decode() for x in line.split("\t")[1:]] for line in answers]

    return ask


def _texts(rng: random.Random, n: int) -> list[str]:
    alphabet = "aAzZ09 _-.*+%/=:é日本😀\u00ff\u0100\u07ff\u0800\uffef"
    return ["polygenelubricants", "GydZG_", "", "Aa", "BB"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def test_hash_buckets_are_javas(java):
    rng = random.Random(31)
    texts = _texts(rng, 300)
    longs = [0, -1, 2**31, -(2**31), 2**63 - 1, -(2**63), 1 << 32] + [rng.randint(-(2**63), 2**63 - 1) for _ in range(300)]
    ints = [0, -1, 2**31 - 1, -(2**31)] + [rng.randint(-(2**31), 2**31 - 1) for _ in range(300)]
    buckets = [rng.choice([1, 2, 7, 16, 53, 1000, 2**31 - 1]) for _ in range(1000)]
    requests = ([("hash-string", t, b) for t, b in zip(texts, buckets)] + [("hash-long", v, b) for v, b in zip(longs, buckets)]
                + [("hash-int", v, b) for v, b in zip(ints, buckets)])
    answers = java(requests)
    differ = 0
    for (kind, value, n), answer in zip(requests, answers):
        source = kind.split("-")[1]
        f = make_function("hash", "x", buckets=n)
        assert f.apply(value, source) == int(answer[0]), (kind, value, n)
        if source == "string":
            assert (_utf8_hash(value) & 0x7FFFFFFF) % n == int(answer[1]), value  # the conversion's diagnosis
            differ += answer[0] != answer[1]
    assert differ > 0  # Kite's bucket of non-ASCII text depends on String vs Utf8: read_kite checks every row


def test_calendar_and_date_format_are_javas_from_1583(java):
    rng = random.Random(1582)
    low, high = -12_212_553_600_000, 253_402_300_799_999  # 1583-01-01 to 9999-12-31T23:59:59.999 UTC
    millis = [0, -1, 1_767_225_599_999, 951_782_400_000] + [rng.randint(low, high) for _ in range(400)]
    pattern = "yyyy-MM-dd'T'HH-mm-ss"
    answers = java([("calendar", m) for m in millis] + [("dateFormat", m, pattern) for m in millis])
    units = [make_function(u, "ts") for u in ("year", "month", "day", "hour", "minute")]
    formatted = make_function("dateFormat", "ts", "d", format=pattern)
    for m, fields, (text,) in zip(millis, answers, answers[len(millis):]):
        assert [f.apply(m, "long") for f in units] == [int(x) for x in fields], m
        assert all(len(x) == 2 for x in fields[1:])  # Kite's month=01: cdkds reads the folder as 1
        assert formatted.apply(m, "long") == text, m
    # before the Gregorian cutover Java's calendar is Julian: read_kite refuses rows it would misplace
    early = [-12_219_292_800_000 - 86_400_000, -12_219_724_800_000, -30_000_000_000_000, -62_000_000_000_000]
    answers = java([("calendar", m) for m in early])
    assert answers[0][:3] == ["1582", "10", "04"]  # 1582-10-14 proleptic Gregorian
    assert [f.apply(early[0], "long") for f in units[:3]] == [1582, 10, 14]
    assert [int(a[1]) for a in answers] == [julian_month(m) for m in early]  # the test layouts' model of Kite


def test_fixed_size_ranges_are_javas_below_2_to_the_52(java):
    rng = random.Random(5)
    cases = [(rng.randint(-(2**52), 2**52), rng.choice([1, 3, 10, 1000, 86_400_000, 2**20 + 1])) for _ in range(300)]
    cases += [(-1, 10), (-10, 10), (0, 7), (9, 10)]
    for (value, size), (answer,) in zip(cases, java([("fixedSizeRange", v, s) for v, s in cases])):
        assert make_function("range", "x", size=size).apply(value, "long") == int(answer), (value, size)
    beyond = [(2**62 + 1, 3), (2**63 - 1, 7), (-(2**63), 1000), (2**53 + 1, 2)]
    for (value, size), (answer,) in zip(beyond, java([("fixedSizeRange", v, s) for v, s in beyond])):
        assert kite_fixed_range(value, size) == int(answer)  # the test layouts' model of Kite
    assert kite_fixed_range(2**62 + 1, 3) != make_function("range", "x", size=3).apply(2**62 + 1, "long")


def test_url_encoding_of_folder_values_is_javas(java):
    texts = _texts(random.Random(9), 200)
    for text, (answer,) in zip(texts, java([("url", t) for t in texts])):
        assert url_encode(text) == answer, text  # the test layouts' folders are Kite's


_JAVA_9_COMMENT = re.compile(r"(^|[\r\n])[ \t\f]*(\\\\)*\\(\r\n|\r|\n)[ \t\f]*[#!]")


def test_properties_files_read_as_java_reads_them(java):
    rng = random.Random(17)
    pieces = ["k", "=", ":", " ", "\t", "\f", "\\", "\n", "\r", "\r\n", "#", "!", "u", "0041", "\\u00e9", "é", "v",
              "\\\n   ", "\\\\", "\\t", "\\n", "\\b", "x y"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 25))) for _ in range(600)]
    # Kite read its files on Java 8, where a line continuing an empty one is never a comment;
    # Java 9 and later take one starting with # or ! for a comment (test_kite_expression has Java 8's answer)
    texts = [t for t in texts if not _JAVA_9_COMMENT.search(t)]
    for text, answer in zip(texts, java([("properties", t) for t in texts])):
        try:
            mine = parse_properties(text.encode("latin-1"), "p")
        except KiteDatasetError:
            assert answer == ["ERROR"], repr(text)
            continue
        assert answer != ["ERROR"], repr(text)
        assert sorted(mine.items()) == list(zip(answer[::2], answer[1::2])), repr(text)
