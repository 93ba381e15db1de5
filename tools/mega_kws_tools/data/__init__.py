# SPDX-License-Identifier: Apache-2.0
"""Keyword datasets: make_sc10 (synthetic speech from a voice pool;
its parts: sc10_recipe, sc10_audio, sc10_render, sc10_clips), voices
(that pool and its voice-disjoint splits), fetch_real_sc (real Speech Commands
clips), speechocean (keyword-free real speech), make_stream (continuous
evaluation recordings), layout (the Speech Commands folder layout and splits)."""
