# SPDX-License-Identifier: Apache-2.0
"""tools/scripts/music_negatives.sh (issue 83 item 5): the music tracks of the
packages it names become 16 kHz mono WAV files with their package, version and
license in SOURCES.txt. Run against a stand-in apt-get that hands over two small
packages built here with dpkg-deb (no download): one with a stereo 44.1 kHz Ogg
track under a music folder, and one with none, which the script refuses."""

import os
import shutil
import subprocess
import wave

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "scripts", "music_negatives.sh")
pytestmark = pytest.mark.skipif(not (shutil.which("dpkg-deb") and shutil.which("sox")), reason="needs dpkg-deb, sox")


def build_deb(tmp_path, name, version, track, long_sound="", license_line="License: GPL-2+"):
    """a .deb of package name holding usr/share/games/<name>/music/<track>.ogg (if track), a short
    sound, a 20 s sounds/<long_sound>.ogg (if long_sound) and a copyright with license_line"""
    root = tmp_path / f"{name}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
                                             "Maintainer: test <t@example.org>\nDescription: test\n")
    doc = root / "usr" / "share" / "doc" / name
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(f"Format: x\n\nFiles: *\nCopyright: 2020 someone\n{license_line}\n")
    games = root / "usr" / "share" / "games" / name
    (games / "music").mkdir(parents=True)
    (games / "sounds").mkdir()
    subprocess.run(["sox", "-n", "-r", "44100", "-c", "2", str(games / "sounds" / "click.ogg"), "synth", "0.1",
                    "sine", "880"], check=True)  # not music: left out
    if track:
        subprocess.run(["sox", "-n", "-r", "44100", "-c", "2", str(games / "music" / f"{track}.ogg"), "synth", "1.5",
                        "sine", "440"], check=True)
    if long_sound:  # music kept beside the sounds: taken for its length
        subprocess.run(["sox", "-n", "-r", "22050", "-c", "1", str(games / "sounds" / f"{long_sound}.ogg"), "synth",
                        "20", "sine", "330"], check=True)
    out = tmp_path / "debs" / f"{name}_{version}_all.deb"
    out.parent.mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(out)], check=True, capture_output=True)


def run_script(tmp_path, out, *packages):
    """music_negatives.sh OUT [PACKAGE ...] with apt-get replaced by a copy of tmp_path/debs' packages"""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "apt-get"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = download ] || exit 9\ncp {tmp_path}/debs/*.deb .\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run(["bash", SCRIPT, str(out), *packages], capture_output=True, text=True, env=env, timeout=120)


def test_music_tracks_become_16_khz_mono_wav_files_with_their_sources(tmp_path):
    build_deb(tmp_path, "xmoto-data", "1.0-1", "Fox Run")
    build_deb(tmp_path, "lincity-ng-data", "2.9-5", "01 - city")
    r = run_script(tmp_path, tmp_path / "music")
    assert r.returncode == 0, r.stderr
    names = sorted(os.listdir(tmp_path / "music"))
    assert names == ["SOURCES.txt", "lincity-ng-data-01_-_city.wav", "xmoto-data-Fox_Run.wav"], names
    for name in names[1:]:
        with wave.open(str(tmp_path / "music" / name)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            assert abs(w.getnframes() - 24000) <= 16  # 1.5 s
    sources = (tmp_path / "music" / "SOURCES.txt").read_text()
    assert "xmoto-data-Fox_Run.wav: xmoto-data 1.0-1, GPL-2+, /usr/share/games/xmoto-data/music/Fox Run.ogg" in sources
    assert "click" not in sources and "chromium-bsu-data, frozen-bubble-data" in sources


def test_a_long_track_beside_the_sounds_is_music_and_an_unnamed_license_points_to_its_text(tmp_path):
    build_deb(tmp_path, "mu-cade-data", "0.11-13", "", long_sound="mcd1",
              license_line="License:\n\n    Redistribution and use in source and binary forms ...")
    r = run_script(tmp_path, tmp_path / "music", "mu-cade-data")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "music")) == ["SOURCES.txt", "mu-cade-data-mcd1.wav"]
    with wave.open(str(tmp_path / "music" / "mu-cade-data-mcd1.wav")) as w:
        assert abs(w.getnframes() - 20 * 16000) <= 16
    sources = (tmp_path / "music" / "SOURCES.txt").read_text()
    assert ("mu-cade-data-mcd1.wav: mu-cade-data 0.11-13, its /usr/share/doc/mu-cade-data/copyright, "
            "/usr/share/games/mu-cade-data/sounds/mcd1.ogg") in sources, sources
    assert "click" not in sources


def test_a_package_without_music_is_refused_and_nothing_is_left(tmp_path):
    build_deb(tmp_path, "xmoto-data", "1.0-1", "")
    r = run_script(tmp_path, tmp_path / "music")
    assert r.returncode == 1 and "no music found in xmoto-data 1.0-1" in r.stderr, r.stderr
    assert not (tmp_path / "music").exists() and not (tmp_path / "music.part").exists()


def test_usage_and_the_held_out_music_refused(tmp_path):
    r = subprocess.run(["bash", SCRIPT], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: music_negatives.sh OUT [PACKAGE ...]" in r.stderr
    for held in ("chromium-bsu-data", "frozen-bubble-data", "gunroar-data"):
        r = subprocess.run(["bash", SCRIPT, str(tmp_path / "music"), "xmoto-data", held], capture_output=True, text=True)
        assert r.returncode == 2 and f"{held} is held out" in r.stderr, r.stderr
        assert not (tmp_path / "music").exists()
