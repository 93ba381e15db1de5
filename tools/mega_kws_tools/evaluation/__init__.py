# SPDX-License-Identifier: Apache-2.0
"""Evaluation: evaluate (a .mega model through the shipped runtime), streamscore
(the detector and scoring both share), tune_detection (detection defaults on a
validation stream), ship_rule (which run ships), plot_card (the model card's
pictures), accuracy (clip accuracy in PyTorch), listen_check (what a recognizer
of real speech hears in the synthetic voices)."""
