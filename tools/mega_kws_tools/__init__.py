# SPDX-License-Identifier: Apache-2.0
"""mega-kws's Python tools for training and data, one package laid out by what
things are:

  model       the PyTorch reference model (MegaConfig, MegaKWS)
  audio       WAV input and output (one reader, one writer)
  data        keyword datasets: synthetic speech, real sources, splits, streams
  convert     PyTorch checkpoint <-> .mega model file, the file's schema
  evaluation  clip and stream scoring, detection tuning, the shipping rule
  training    the training run and what it is made of
  teacher     the pretrained speech teacher: openWakeWord's melspectrogram and
              Google's speech_embedding, fetched and ported to PyTorch

Install it (editable) with `pip install --no-build-isolation -e tools`, or run
it from the repository root without installing:

    PYTHONPATH=tools /usr/bin/python3 -m mega_kws_tools.training.train --help

Modules import each other through the package (`from mega_kws_tools import
model`); nothing here edits sys.path.
"""
