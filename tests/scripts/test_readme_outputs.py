# SPDX-License-Identifier: Apache-2.0
"""scripts/check_readme_outputs.py: which differences between the README's output and a run's it accepts."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from check_readme_outputs import same_line, same_output  # noqa: E402


def test_the_last_printed_digit_may_differ():
    # seen: the README made on an AVX-512 machine, the run on an AVX2 one
    assert same_line('"logits": [-2.959363, -2.8431]', '"logits": [-2.959364, -2.843099]')
    assert same_line("1.000\tyes\t0.978", "1.000\tyes\t0.978")


def test_more_than_the_last_digit_is_refused():
    assert not same_line('"score": 0.976084', '"score": 0.976087')
    assert not same_line("0.250\tyes\t0.716", "0.260\tyes\t0.716")
    assert not same_line("-2.8431", "-2.8433")


def test_words_and_layout_must_be_the_same():
    assert not same_line("1.000\tyes\t0.978", "1.000\tno\t0.978")
    assert not same_line("0.5", "0.5 0.5")
    assert not same_line("scanned 12 s", "scanned 13 s")
    assert not same_output(["a"], ["a", "b"])
    assert same_output(["a 0.1234"], ["a 0.1235"])
