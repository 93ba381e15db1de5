# SPDX-License-Identifier: Apache-2.0
"""tools/scripts/music_negatives.sh (issue 83 item 5): the music tracks of the
packages it names become 16 kHz mono WAV files with their package, version and
license in SOURCES.txt. Run against a stand-in apt-get that hands over two small
packages built here with dpkg-deb (no download): one with a stereo 44.1 kHz Ogg
track under a music folder, and one with none, which the script refuses; an
Opus track (warzone2100-music's kind) goes through opusdec."""

import os
import shutil
import subprocess
import wave

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "scripts", "music_negatives.sh")
pytestmark = pytest.mark.skipif(not (shutil.which("dpkg-deb") and shutil.which("sox")), reason="needs dpkg-deb, sox")


def build_deb(tmp_path, name, version, track, long_sound="", license_line="License: GPL-2+", opus_tracks=()):
    """a .deb of package name holding usr/share/games/<name>/music/<track>.ogg (if track), a short
    sound, a 20 s sounds/<long_sound>.ogg (if long_sound), a 2 s music/<path>.opus for each of
    opus_tracks (paths relative to music/) and a copyright with license_line"""
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
    for path in opus_tracks:
        opus = games / "music" / f"{path}.opus"
        opus.parent.mkdir(parents=True, exist_ok=True)
        wav = tmp_path / "opus-source.wav"
        subprocess.run(["sox", "-n", "-r", "48000", "-c", "2", "-b", "16", str(wav), "synth", "2", "sine", "523"],
                       check=True)
        subprocess.run(["opusenc", "--quiet", str(wav), str(opus)], check=True)
    out = tmp_path / "debs" / f"{name}_{version}_all.deb"
    out.parent.mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(out)], check=True, capture_output=True)


def run_script(tmp_path, out, *packages, only_tools=()):
    """music_negatives.sh OUT [PACKAGE ...] with apt-get replaced by a copy of tmp_path/debs' packages;
    with only_tools, the script finds those commands and no others"""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "apt-get"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = download ] || exit 9\ncp {tmp_path}/debs/*.deb .\n")
    fake.chmod(0o755)
    for tool in only_tools:
        if not (bin_dir / tool).exists():
            os.symlink(shutil.which(tool), bin_dir / tool)
    path = str(bin_dir) if only_tools else f"{bin_dir}:{os.environ['PATH']}"
    return subprocess.run([shutil.which("bash"), SCRIPT, str(out), *packages], capture_output=True, text=True,
                          env=dict(os.environ, PATH=path), timeout=120)


def assert_tracks(folder, names, seconds, tolerance):
    """folder holds SOURCES.txt and names, each a 16 kHz mono 16-bit WAV file of seconds (+- tolerance frames)"""
    assert sorted(os.listdir(folder)) == ["SOURCES.txt", *names], sorted(os.listdir(folder))
    for name in names:
        with wave.open(str(folder / name)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            assert abs(w.getnframes() - seconds * 16000) <= tolerance, (name, w.getnframes())


def test_music_tracks_become_16_khz_mono_wav_files_with_their_sources(tmp_path):
    build_deb(tmp_path, "xmoto-data", "1.0-1", "Fox Run")
    build_deb(tmp_path, "lincity-ng-data", "2.9-5", "01 - city")
    r = run_script(tmp_path, tmp_path / "music")
    assert r.returncode == 0, r.stderr
    names = ["lincity-ng-data-01_-_city.wav", "xmoto-data-Fox_Run.wav"]
    assert_tracks(tmp_path / "music", names, 1.5, 16)
    sources = (tmp_path / "music" / "SOURCES.txt").read_text()
    assert "xmoto-data-Fox_Run.wav: xmoto-data 1.0-1, GPL-2+, /usr/share/games/xmoto-data/music/Fox Run.ogg" in sources
    assert "click" not in sources and "chromium-bsu-data, frozen-bubble-data" in sources
    again = run_script(tmp_path, tmp_path / "music-again")  # sox -R: the same dither, the same bytes
    assert again.returncode == 0, again.stderr
    for name in ["SOURCES.txt", *names]:
        assert (tmp_path / "music" / name).read_bytes() == (tmp_path / "music-again" / name).read_bytes(), name


def test_a_long_track_beside_the_sounds_is_music_and_an_unnamed_license_points_to_its_text(tmp_path):
    build_deb(tmp_path, "mu-cade-data", "0.11-13", "", long_sound="mcd1",
              license_line="License:\n\n    Redistribution and use in source and binary forms ...")
    r = run_script(tmp_path, tmp_path / "music", "mu-cade-data")
    assert r.returncode == 0, r.stderr
    assert_tracks(tmp_path / "music", ["mu-cade-data-mcd1.wav"], 20, 16)
    sources = (tmp_path / "music" / "SOURCES.txt").read_text()
    assert ("mu-cade-data-mcd1.wav: mu-cade-data 0.11-13, its /usr/share/doc/mu-cade-data/copyright, "
            "/usr/share/games/mu-cade-data/sounds/mcd1.ogg") in sources, sources
    assert "click" not in sources


@pytest.mark.skipif(not (shutil.which("opusenc") and shutil.which("opusdec")), reason="needs opus-tools")
def test_opus_tracks_are_decoded_and_two_tracks_of_one_name_refused(tmp_path):
    build_deb(tmp_path, "warzone2100-music", "4.3.3-3", "", opus_tracks=("menu", "albums/a/track1"))
    r = run_script(tmp_path, tmp_path / "music", "warzone2100-music")
    assert r.returncode == 0, r.stderr
    # the 0.1 s sounds/click.ogg is left out: the game's folder, named after the package, says "music";
    # Opus pads the ends a little
    assert_tracks(tmp_path / "music", ["warzone2100-music-menu.wav", "warzone2100-music-track1.wav"], 2, 400)
    sources = (tmp_path / "music" / "SOURCES.txt").read_text()
    assert ("warzone2100-music-track1.wav: warzone2100-music 4.3.3-3, GPL-2+, "
            "/usr/share/games/warzone2100-music/music/albums/a/track1.opus") in sources, sources
    shutil.rmtree(tmp_path / "debs")
    shutil.rmtree(tmp_path / "warzone2100-music-root")
    build_deb(tmp_path, "warzone2100-music", "4.3.3-3", "", opus_tracks=("albums/a/track1", "albums/b/track1"))
    r = run_script(tmp_path, tmp_path / "music2", "warzone2100-music")
    assert r.returncode == 1 and "would both be warzone2100-music-track1.wav" in r.stderr, r.stderr
    assert not (tmp_path / "music2").exists()


@pytest.mark.skipif(not shutil.which("opusenc"), reason="needs opus-tools")
def test_opus_music_without_opusdec_is_refused_and_nothing_is_left(tmp_path):
    build_deb(tmp_path, "warzone2100-music", "4.3.3-3", "", opus_tracks=("menu",))
    tools = ("dpkg-deb", "tar", "sox", "soxi", "mktemp", "rm", "mkdir", "mv", "grep", "cut", "find", "sort",
             "basename", "dirname", "tr", "awk", "ls", "wc", "id", "cp")  # the script's, and apt-get's stand-in's
    r = run_script(tmp_path, tmp_path / "music", "warzone2100-music", only_tools=tools)  # no opusdec
    assert r.returncode == 1 and "has Opus music; opusdec not found" in r.stderr, r.stderr
    assert not (tmp_path / "music").exists() and not (tmp_path / "music.part").exists()


def test_a_package_without_music_is_refused_and_nothing_is_left(tmp_path):
    build_deb(tmp_path, "xmoto-data", "1.0-1", "")
    r = run_script(tmp_path, tmp_path / "music")
    assert r.returncode == 1 and "no music found in xmoto-data 1.0-1" in r.stderr, r.stderr
    assert not (tmp_path / "music").exists() and not (tmp_path / "music.part").exists()


def test_usage_and_the_held_out_music_refused(tmp_path):
    r = subprocess.run(["bash", SCRIPT], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: music_negatives.sh OUT [PACKAGE ...]" in r.stderr
    for held in ("chromium-bsu-data", "frozen-bubble-data", "gunroar-data", "wesnoth-1.16-music"):
        r = subprocess.run(["bash", SCRIPT, str(tmp_path / "music"), "xmoto-data", held], capture_output=True, text=True)
        assert r.returncode == 2 and f"{held} is held out" in r.stderr, r.stderr
        assert not (tmp_path / "music").exists()
