#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The public git repositories the real training data are rebuilt from, each
at the commit this project reads, one line each: `owner/name commit`. They are
the repositories of real_sc_sources.txt (read by fetch_real_sc) and the
read-sentence sources of sentence_keywords (speechocean762, whose commit
speechocean also reads, and dataset-voice-cathy).
tools/scripts/reproduce_training.sh clones these and nothing else.

  python3 -m mega_kws_tools.data.sources [--sources FILE]
"""

import argparse
import os

from mega_kws_tools.data.fetch_real_sc import parse_sources_file
from mega_kws_tools.data.sentence_keywords import SOURCES as SENTENCE_SOURCES

REAL_SC_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_sc_sources.txt")


def pinned_repositories(sources_file: str = REAL_SC_SOURCES) -> list:
    """(owner/name, commit) of every source, each repository once (in file order, then the sentence sources)."""
    out = []
    pairs = [(repo, commit) for repo, commit, _ in parse_sources_file(sources_file)]
    pairs += [(repo, commit) for repo, commit, *_ in SENTENCE_SOURCES.values()]
    for repo, commit in pairs:
        known = dict(out)
        if repo in known and known[repo] != commit:
            raise ValueError(f"{repo} is pinned at two commits: {known[repo]} and {commit}")
        if repo not in known:
            out.append((repo, commit))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", default=REAL_SC_SOURCES, help="the real Speech Commands sources file [%(default)s]")
    args = ap.parse_args(argv)
    for repo, commit in pinned_repositories(args.sources):
        print(repo, commit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
