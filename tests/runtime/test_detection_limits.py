# SPDX-License-Identifier: Apache-2.0
"""The detection settings' ranges (smoothing hops, refractory time) have one
C++ definition, runtime/include/mega/detection_limits.hpp, which the loader
(runtime/src/model.cpp), the detector (runtime/src/detector.cpp) and
keyword_spotter's options use; the converter (mega_kws_tools.convert.mega_convert)
and the Python package (mega_kws._args) cannot include it and keep their own
copy, so this test parses the header and checks that they, and the ranges the
C API's header and the CLI's help state, agree with it."""

import os
import re

import pytest

from mega_kws import _args
from mega_kws_tools.convert import mega_convert

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
HEADER = os.path.join(ROOT, "runtime", "include", "mega", "detection_limits.hpp")


def read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def without_comments(source):
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S)


@pytest.fixture(scope="module")
def limits():
    """{name: value} of the header's `constexpr int32_t kName = value;` lines."""
    found = dict(re.findall(r"constexpr\s+int32_t\s+(k\w+)\s*=\s*(-?\d+)\s*;", read(HEADER)))
    names = ("kMinSmoothingHops", "kMaxSmoothingHops", "kMinRefractoryMs", "kMaxRefractoryMs")
    assert set(names) <= set(found), f"{HEADER} lacks {set(names) - set(found)}"
    return {name: int(found[name]) for name in names}


def test_the_python_copies_agree_with_the_header(limits):
    smoothing = (limits["kMinSmoothingHops"], limits["kMaxSmoothingHops"])
    refractory = (limits["kMinRefractoryMs"], limits["kMaxRefractoryMs"])
    assert tuple(mega_convert.SMOOTHING_HOPS_RANGE) == smoothing
    assert tuple(mega_convert.REFRACTORY_MS_RANGE) == refractory
    assert tuple(_args.SMOOTHING_HOPS_RANGE) == smoothing
    assert tuple(_args.REFRACTORY_MS_RANGE) == refractory


@pytest.mark.parametrize("path", [("runtime", "src", "model.cpp"), ("runtime", "src", "detector.cpp"),
                                  ("apps", "keyword_spotter", "cli_options.cpp")])
def test_the_cpp_checks_use_the_header_not_numbers_of_their_own(limits, path):
    code = without_comments(read(*path))
    assert '#include "mega/detection_limits.hpp"' in code, f"{os.path.join(*path)} does not include the header"
    # a statement about smoothing or the refractory time that spells a bound out (n_dim's 1024 is another limit)
    statements = [st for st in re.split(r"[;{}]", code) if re.search(r"smoothing|refractory", st, re.I)]
    for name in ("kMaxSmoothingHops", "kMaxRefractoryMs"):
        spelled = [st.strip() for st in statements if re.search(rf"(?<![\w.]){limits[name]}(?![\w.])", st)]
        assert not spelled, f"{os.path.join(*path)} spells {limits[name]} out; use mega::{name}: {spelled}"


def test_the_stated_ranges_are_the_headers(limits):
    smoothing = f"{limits['kMinSmoothingHops']}..{limits['kMaxSmoothingHops']}"
    refractory = f"{limits['kMinRefractoryMs']}..{limits['kMaxRefractoryMs']}"
    c_api = read("runtime", "include", "mega", "mega_kws.h")
    assert re.search(rf"smoothing_hops;.*{re.escape(smoothing)}", c_api), "mega_kws.h: smoothing_hops's range"
    assert re.search(rf"refractory_ms;.*{re.escape(refractory)}", c_api), "mega_kws.h: refractory_ms's range"
    cli = read("apps", "keyword_spotter", "cli_options.cpp")
    assert re.search(rf'"--smoothing",[^\n]*\({re.escape(smoothing)}\)', cli), "keyword_spotter --smoothing's help"
    assert re.search(rf'"--refractory-ms",[^\n]*\({re.escape(refractory)}\)', cli), \
        "keyword_spotter --refractory-ms's help"
