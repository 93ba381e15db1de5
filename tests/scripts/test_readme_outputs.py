# SPDX-License-Identifier: Apache-2.0
"""scripts/check_readme_outputs.py: which differences between the README's output and a run's it accepts."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from check_readme_outputs import DEMO_INTRO, demo_block, demo_commands, same_line, same_output  # noqa: E402


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


def test_a_rounding_level_number_with_an_exponent_may_be_any_such():
    # the self-test's largest logit difference depends on the CPU's summation order
    assert same_line("max abs logit difference 1.91e-06 (tolerance 0.001)",
                     "max abs logit difference 4.53e-06 (tolerance 0.001)")
    assert not same_line("max abs logit difference 1.91e-06 (tolerance 0.001)",
                         "max abs logit difference 1.91e-03 (tolerance 0.001)")
    assert not same_line("difference 1.91e-06 (tolerance 0.001)", "difference 1.91e-06 (tolerance 0.01)")


def test_the_first_commands_output_is_the_demo_scripts():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    cmds = demo_commands(root)
    assert cmds and all(c.startswith("./build/keyword_spotter ") and "$MODEL" not in c for c in cmds)
    assert any(" classify " in c for c in cmds)
    text = "intro\n\n" + DEMO_INTRO + "\n\n```\nself-test passed\nsamples/go.wav\tgo\t0.9\n```\nafter\n"
    assert demo_block(text) == (6, ["self-test passed", "samples/go.wav\tgo\t0.9"])
    assert demo_block("no such line\n```\nx\n```\n") is None
