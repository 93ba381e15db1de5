# SPDX-License-Identifier: Apache-2.0
"""Regenerate the converter's FlatBuffers Python code (the schema subpackage)
from formats/mega_model.fbs:

  python3 -m mega_kws_tools.convert.gen_schema [--schema FBS] [--out DIR] [--flatc FLATC]

flatc --python writes the namespace mega.fb as folders mega/fb/ whose modules
import each other absolutely (`from mega.fb.HParams import HParams`); this
writes the modules flat into DIR (default: this package's schema/ folder) with
those imports made relative (`from .HParams import HParams`). The schema's
own __init__.py is left alone. The ctest schema_python_in_sync runs this into
a temporary folder and compares.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ABSOLUTE = re.compile(r"^(\s*)from mega\.fb\.(\w+) import ", re.M)


def generate(schema: str, out: str, flatc: str = "flatc") -> list:
    """Runs flatc on schema and writes its mega/fb modules into out with
    relative imports; returns the names written."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([flatc, "--python", "-o", tmp, schema], check=True)
        src = os.path.join(tmp, "mega", "fb")
        names = sorted(n for n in os.listdir(src) if n.endswith(".py") and n != "__init__.py")
        os.makedirs(out, exist_ok=True)
        for name in names:
            with open(os.path.join(src, name)) as f:
                text = ABSOLUTE.sub(r"\1from .\2 import ", f.read())
            with open(os.path.join(out, name), "w") as f:
                f.write(text)
    return names


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schema", default=os.path.join(root, "formats", "mega_model.fbs"))
    ap.add_argument("--out", default=os.path.join(HERE, "schema"))
    ap.add_argument("--flatc", default="flatc")
    args = ap.parse_args()
    names = generate(args.schema, args.out, args.flatc)
    print(f"{len(names)} modules written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
