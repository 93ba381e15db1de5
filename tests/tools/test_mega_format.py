#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The .mega file's framing is defined once per language, formats/mega_format.h
(C++) and tools/mega_kws_tools/convert/mega_format.py (Python): the two must hold the same
constants with the same values, agree with the schema (its file identifier and
version history), describe the trailer real files carry, and be the only
places these constants are defined.
Runs with /usr/bin/python3 -m pytest tests/test_mega_format.py."""

import os
import re
import zlib

import pytest

from mega_kws_tools.convert import mega_format

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root

HEADER = os.path.join(ROOT, "formats", "mega_format.h")
SCHEMA = os.path.join(ROOT, "formats", "mega_model.fbs")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "data")
MODELS = os.path.join(ROOT, "models")

_CONSTEXPR = re.compile(r"constexpr\s+(?P<type>[\w:]+)\s+(?P<name>k\w+)\s*(?P<array>\[\d*\])?\s*=\s*(?P<value>[^;]+);")
_INT = re.compile(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*")
_CHARS = re.compile(r"\{\s*'.'(\s*,\s*'.')*\s*\}")


def parse_header(text):
    """{name: int or bytes} for every constexpr of the header. Strict: a
    constexpr this parser cannot read fails the test instead of being skipped."""
    out = {}
    for line in text.splitlines():
        code = line.split("//")[0]
        if "constexpr" not in code:
            continue
        m = _CONSTEXPR.search(code)
        assert m, f"mega_format.h: cannot read {line.strip()!r} (a literal integer or char array expected)"
        value = m["value"].strip()
        if _INT.fullmatch(value):
            out[m["name"]] = int(_INT.fullmatch(value)[1], 0)
        elif _CHARS.fullmatch(value):
            out[m["name"]] = "".join(re.findall(r"'(.)'", value)).encode()
        else:
            pytest.fail(f"mega_format.h: cannot read the value of {m['name']}: {value!r}")
    return out


def python_name(cpp_name):
    """kTrailerCrcOffset -> TRAILER_CRC_OFFSET, kCrc32Polynomial -> CRC32_POLYNOMIAL."""
    return "_".join(w.upper() for w in re.findall(r"[A-Z][a-z0-9]*", cpp_name[1:]))


def python_constants():
    return {n: v for n, v in vars(mega_format).items() if re.fullmatch(r"[A-Z][A-Z0-9_]*", n)}


@pytest.fixture(scope="module")
def cpp():
    with open(HEADER, encoding="utf-8") as f:
        return parse_header(f.read())


def bitwise_crc32(data, polynomial):
    """CRC-32 as the C++ code computes it from kCrc32Polynomial (reflected,
    initial value and final XOR all ones)."""
    c = 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ polynomial if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def test_header_and_python_hold_the_same_constants(cpp):
    py = python_constants()
    assert sorted(python_name(n) for n in cpp) == sorted(py), "a constant defined in one language only"
    for name, value in cpp.items():
        assert py[python_name(name)] == value, f"{name} = {value!r} in C++, {python_name(name)} = " \
                                               f"{py[python_name(name)]!r} in Python"


def test_schema_file_agrees(cpp):
    with open(SCHEMA, encoding="utf-8") as f:
        schema = f.read()
    ident = re.search(r'^file_identifier\s+"(\w+)";', schema, re.M)
    assert ident and ident[1].encode() == cpp["kFileIdentifier"] == mega_format.FILE_IDENTIFIER
    history = re.search(r"^// Schema versions:\n((?://\s+\S.*\n)+)", schema, re.M)  # entries may run on
    assert history, "mega_model.fbs has no '// Schema versions:' history"
    versions = [int(v) for v in re.findall(r"^//\s+(\d+):", history[1], re.M)]
    assert versions == list(range(1, len(versions) + 1)), f"history numbers {versions}"
    assert versions[-1] == cpp["kSchemaVersion"] == mega_format.SCHEMA_VERSION, \
        f"newest version: {versions[-1]} in the schema's history, {cpp['kSchemaVersion']} in mega_format.h, " \
        f"{mega_format.SCHEMA_VERSION} in mega_format.py"


def test_trailer_layout_is_consistent(cpp):
    magic = cpp["kTrailerMagic"]
    assert cpp["kTrailerLengthOffset"] == len(magic)
    assert cpp["kTrailerCrcOffset"] == cpp["kTrailerLengthOffset"] + 4
    assert cpp["kTrailerBytes"] == cpp["kTrailerCrcOffset"] + 4


def test_crc_polynomial_is_zlibs(cpp):
    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert bitwise_crc32(data, cpp["kCrc32Polynomial"]) == zlib.crc32(data), data[:16]


def test_committed_files_carry_the_trailer_both_describe(cpp):
    # the shipped models and the well-formed fixtures (bad_*.mega are broken on purpose)
    paths = [os.path.join(MODELS, n) for n in sorted(os.listdir(MODELS)) if n.endswith(".mega")]
    paths += [os.path.join(FIXTURES, n) for n in sorted(os.listdir(FIXTURES))
              if n.endswith(".mega") and not n.startswith("bad_")]
    assert len(paths) > 5, paths
    for path in paths:
        name = os.path.relpath(path, ROOT)
        with open(path, "rb") as f:
            data = f.read()
        trailer = data[-cpp["kTrailerBytes"]:]
        body = data[:-cpp["kTrailerBytes"]]
        assert trailer[:len(cpp["kTrailerMagic"])] == cpp["kTrailerMagic"], name
        length = int.from_bytes(trailer[cpp["kTrailerLengthOffset"]:][:4], "little")
        crc = int.from_bytes(trailer[cpp["kTrailerCrcOffset"]:][:4], "little")
        assert length == len(data), name
        assert crc == bitwise_crc32(body, cpp["kCrc32Polynomial"]), name
        assert body[4:8] == cpp["kFileIdentifier"], name
        # Python reads and writes the same bytes
        assert mega_format.strip_trailer(data) == body, name
        assert mega_format.add_trailer(body) == data, name


def test_defined_nowhere_else():
    """The constants' definitions live in the two files only (uses elsewhere are fine)."""
    cpp_def = re.compile(r"constexpr\s+[\w:]+\s+(k(?:SchemaVersion|FileIdentifier|Trailer\w*|Crc32Polynomial))\b")
    py_def = re.compile(r"^\s*(SCHEMA_VERSION|FILE_IDENTIFIER|TRAILER_\w+|CRC32_POLYNOMIAL)\s*=", re.M)
    found = []
    for top in ("apps", "bench", "fuzz", "kernels", "runtime", "tests", "tools", "python", "formats", "examples"):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for n in files:
                path = os.path.join(d, n)
                if path in (HEADER, mega_format.__file__) or not n.endswith((".h", ".hpp", ".cpp", ".cuh", ".cu",
                                                                             ".c", ".py")):
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                pattern = py_def if n.endswith(".py") else cpp_def
                found += [f"{os.path.relpath(path, ROOT)}: {m[1]}" for m in pattern.finditer(text)]
    assert not found, "defined outside formats/mega_format.h and tools/mega_kws_tools/convert/mega_format.py: " + ", ".join(found)
