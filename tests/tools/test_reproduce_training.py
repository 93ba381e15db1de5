# SPDX-License-Identifier: Apache-2.0
"""tools/scripts/reproduce_training.sh, the recipe a user outside runs from a
git clone: it clones exactly the repositories and commits the data tools read
(real_sc_sources.txt, the sentence sources), keeps every folder under the
repository or the WORK it is given, refuses a clone that lacks its commit; and
the model card's "How to train" names no path of the machine it was written on."""

import os
import re
import subprocess

from scripts.check_readme_paths import paths_named
from mega_kws_tools.data import speechocean
from mega_kws_tools.data.sentence_keywords import SOURCES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
SCRIPT = os.path.join(ROOT, "tools", "scripts", "reproduce_training.sh")
SOURCES_FILE = os.path.join(ROOT, "tools", "mega_kws_tools", "data", "real_sc_sources.txt")


def run_script(*stages, **env):
    return subprocess.run(["bash", SCRIPT, *stages], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def listed_sources():
    """(owner/name, commit) of the sources file's lines and of the sentence sources, read here on their own."""
    pairs = set()
    with open(SOURCES_FILE) as f:
        for line in f:
            m = re.match(r"^([\w.-]+/[\w.-]+)\s+([0-9a-f]{40})\b", line)
            if m:
                pairs.add((m.group(1), m.group(2)))
    pairs |= {(repo, commit) for repo, commit, *_ in SOURCES.values()}
    return pairs


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", SCRIPT], check=True)


def test_clones_exactly_the_listed_sources_at_their_commits(tmp_path):
    r = run_script("sources", DRY_RUN="1", WORK=str(tmp_path))
    assert r.returncode == 0, r.stderr
    repo_of = {}
    for url, folder in re.findall(r"^\+ git clone --bare (\S+) (\S+)$", r.stdout, re.M):
        m = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)\.git", url)
        assert m, url
        assert folder == str(tmp_path / "sources" / m.group(1).replace("/", "+") / "repo"), folder
        repo_of[folder] = m.group(1)
    cloned = {(repo_of[folder], commit)
              for folder, commit in re.findall(r"^\+ git --git-dir (\S+) cat-file -e ([0-9a-f]{40})\^\{commit\}$",
                                               r.stdout, re.M)}
    assert len(repo_of) == len(cloned)
    listed = listed_sources()
    assert len(listed) == 7 and ("jimbozhang/speechocean762", speechocean.COMMIT) in listed
    assert cloned == listed


def test_every_folder_is_under_the_repository_or_work(tmp_path):
    work = tmp_path / "w"
    r = run_script(DRY_RUN="1", WORK=str(work))
    assert r.returncode == 0, r.stderr
    assert "continue_real.sh" in r.stdout and "measure_run.sh" in r.stdout
    paths = re.findall(r"(?<![\w.:/])/[^\s:^>]+", r.stdout)
    assert paths
    for p in paths:
        assert p == ROOT or p.startswith((ROOT + "/", str(work) + "/", "/usr/bin/python3")), p
    assert "/work/.mirror" not in r.stdout and "/work/runs" not in r.stdout


def test_a_clone_without_its_commit_is_refused(tmp_path):
    # the first source's folder holds an empty repository with no remote: the commit can be neither
    # found nor fetched, and the script must stop there (no network is needed)
    with open(SOURCES_FILE) as f:
        first = re.findall(r"^([\w.-]+/[\w.-]+)\s", f.read(), re.M)[0]
    folder = tmp_path / "sources" / first.replace("/", "+") / "repo"
    subprocess.run(["git", "init", "-q", "--bare", str(folder)], check=True)
    r = run_script("sources", WORK=str(tmp_path))
    assert r.returncode != 0
    assert f"{first}: commit" in r.stderr and "neither in the clone nor fetchable" in r.stderr, r.stderr


def test_an_unknown_stage_is_refused():
    r = run_script("trian", DRY_RUN="1")
    assert r.returncode != 0 and "no stage 'trian'" in r.stderr


def how_to_train():
    with open(os.path.join(ROOT, "docs", "models.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## How to train.*?(?=^## |\Z)", text, re.M | re.S)
    assert m, "docs/models.md has no 'How to train' section"
    return m.group(0)


def test_how_to_train_names_no_machine_local_path():
    section = how_to_train()
    assert "tools/scripts/reproduce_training.sh" in section
    for local in ("/work/", ".mirror", "the session", "git show"):
        assert local not in section, local
    # and every repository path its commands name exists
    for n, path, kind in paths_named(section):
        if kind == "code" and not path.startswith(("work/", "build/")):
            assert os.path.exists(os.path.join(ROOT, path)), (n, path)
