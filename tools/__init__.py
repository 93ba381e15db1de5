"""mega-kws's Python tools, one package: convert (PyTorch checkpoint <-> .mega
model file), data (synthetic and real keyword datasets), train (training,
detection tuning, evaluation with the runtime).

Modules import each other through the package (`from tools.convert import
mega_torch`). Run a tool from the repository root, either as a module,

    /usr/bin/python3 -m tools.train.train --help

or as a file, as the docs show,

    /usr/bin/python3 tools/train/train.py --help

(a tool run as a file puts the repository root first on sys.path, as -m does
with the current folder, so both import the same package).
"""
