# SPDX-License-Identifier: Apache-2.0
"""keyword_spotter's --json output as a tool reads it: every line of stdout is
one valid UTF-8 JSON object, whatever happens to the files (a directory, NaN
samples, standard input, a file name that is not UTF-8), and each carries a
"type" ("detection", "summary", "error", "classification"); devices --json
without a sound card prints one object too.

Run by ctest (test cli_json) with MEGA_KWS_CLI set; by hand it takes the
source tree's build/keyword_spotter."""

import json
import os
import shutil
import struct
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
CLI = os.environ.get("MEGA_KWS_CLI", os.path.join(ROOT, "build", "keyword_spotter"))
DEMO = os.path.join(ROOT, "models", "sc10-demo.mega")
COMMANDS = os.path.join(ROOT, "samples", "commands.wav")
YES = os.path.join(ROOT, "samples", "yes.wav")


def run(*args, stdin=None, env=None):
    return subprocess.run([CLI, *args], stdin=stdin, capture_output=True, env=env, timeout=300)


def objects(stdout):
    """stdout's lines as JSON objects; fails on any byte that is not UTF-8 or any line that is not an object."""
    text = stdout.decode("utf-8")  # strict: raises on an invalid byte
    rows = [json.loads(line) for line in text.splitlines()]
    assert all(isinstance(r, dict) for r in rows), rows
    return rows


def float_wav(path, samples):
    """A 16 kHz mono float WAV (format 3) holding exactly these samples (NaN included): one header, then the data."""
    data = struct.pack(f"<{len(samples)}f", *samples)
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(data), b"WAVE", b"fmt ", 16, 3, 1, 16000, 64000, 4,
                         32, b"data", len(data))
    with open(path, "wb") as f:
        f.write(header + data)


def check_scan_of(rows, name):
    """name's objects in a scan: its detections, then its summary, which counts them. Returns the detections."""
    mine = [r for r in rows if r["file"] == name]
    assert mine and mine[-1]["type"] == "summary", mine
    dets = mine[:-1]
    assert all(r["type"] == "detection" and {"time_s", "label", "score"} <= set(r) for r in dets), dets
    assert mine[-1]["detections"] == len(dets) and mine[-1]["clipped_samples"] == 0, mine[-1]
    return dets


def test_scan_good_nan_and_directory(tmp_path):
    nan = str(tmp_path / "nan.wav")
    float_wav(nan, [0.0] * 100 + [float("nan")] + [0.0] * 100)
    adir = str(tmp_path / "adir")
    os.mkdir(adir)
    r = run("scan", "-m", DEMO, "--json", "--sensitivity", "0.8", COMMANDS, nan, adir)
    assert r.returncode == 1, r.stderr
    rows = objects(r.stdout)
    assert [x["file"] for x in rows if x["type"] != "detection"] == [COMMANDS, nan, adir], rows
    assert len(check_scan_of(rows, COMMANDS)) == 5
    assert rows[-2:-1] == [{"type": "error", "file": nan, "error": rows[-2]["error"]}]
    assert "not a finite number" in rows[-2]["error"], rows[-2]
    assert rows[-1]["type"] == "error" and rows[-1]["file"] == adir and rows[-1]["error"], rows[-1]
    assert len(rows) == 5 + 3


def test_scan_one_file_names_it():
    r = run("scan", "-m", DEMO, "--json", "--sensitivity", "0.8", COMMANDS)
    assert r.returncode == 0, r.stderr
    rows = objects(r.stdout)
    assert len(check_scan_of(rows, COMMANDS)) == 5 and len(rows) == 6
    assert rows[-1]["duration_s"] == pytest.approx(12.352, abs=1e-3)


def test_scan_stdin_is_named_dash():
    with open(COMMANDS, "rb") as f:
        r = run("scan", "-m", DEMO, "--json", "--sensitivity", "0.8", "-", stdin=f)
    assert r.returncode == 0, r.stderr
    rows = objects(r.stdout)
    assert len(check_scan_of(rows, "-")) == 5 and len(rows) == 6


def test_scan_counts_clipped_samples(tmp_path):
    loud = str(tmp_path / "loud.wav")
    float_wav(loud, [1.5, -2.0, 0.5] * 8000)
    rows = objects(run("scan", "-m", DEMO, "--json", loud).stdout)
    assert rows[-1]["type"] == "summary" and rows[-1]["clipped_samples"] == 16000, rows


@pytest.mark.parametrize("command", ["scan", "classify"])
def test_file_name_not_utf8(tmp_path, command):
    """A name with the byte 0xff: "file" has U+FFFD in its place, "file_hex" the name's bytes."""
    name = os.fsencode(str(tmp_path)) + b"/yes\xff.wav"
    shutil.copy(YES, name)
    missing = os.fsencode(str(tmp_path)) + b"/gone\xfe\xe2\x82.wav"  # \xe2\x82: a cut sequence, one U+FFFD
    r = subprocess.run([CLI, command, "-m", DEMO, "--json", "--threshold", "0.01", name, missing]
                       if command == "scan" else [CLI, command, "-m", DEMO, "--json", name, missing],
                       capture_output=True, timeout=300)
    assert r.returncode == 1, r.stderr
    rows = objects(r.stdout)
    assert rows and all("file" in x and "file_hex" in x for x in rows), rows
    for x in rows:
        want = name if x["file_hex"] == name.hex() else missing
        assert bytes.fromhex(x["file_hex"]) == want
        assert x["file"] == want.decode("utf-8", errors="replace"), x
    assert rows[0]["file_hex"] == name.hex() and rows[-1] == {"type": "error", "file": rows[-1]["file"],
                                                              "file_hex": missing.hex(), "error": rows[-1]["error"]}
    assert any(x["type"] in ("detection", "classification") for x in rows), rows


def test_control_characters_escaped(tmp_path):
    """Tabs, newlines and other control characters in a name are escaped; a UTF-8 name needs no file_hex."""
    name = str(tmp_path / "a\tb\nc\x01d\x7fé.wav")
    shutil.copy(YES, name)
    r = run("classify", "-m", DEMO, "--json", name)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(b"\n") == 1 and b"\x01" not in r.stdout and b"\x7f" not in r.stdout
    rows = objects(r.stdout)
    assert rows[0]["file"] == name and "file_hex" not in rows[0] and rows[0]["type"] == "classification"


def test_classify_names_every_file(tmp_path):
    r = run("classify", "-m", DEMO, "--json", YES, str(tmp_path))
    assert r.returncode == 1
    rows = objects(r.stdout)
    assert [(x["type"], x["file"]) for x in rows] == [("classification", YES), ("error", str(tmp_path))]
    assert rows[0]["label"] == "yes"


def test_devices_without_a_sound_card(tmp_path):
    """No input device (CI's machines have none; no sound server is reachable here): one object saying so."""
    env = {k: v for k, v in os.environ.items() if k not in ("PULSE_SERVER", "JACK_DEFAULT_SERVER")}
    env.update(PULSE_RUNTIME_PATH=str(tmp_path / "nothing"), XDG_RUNTIME_DIR=str(tmp_path / "nothing"))
    # in the sanitizer build: the sound stack PortAudio loads leaks from plugins it has
    # already unloaded, which no suppression can name (scripts/test.sh runs listen so too)
    env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    r = run("devices", "--json", env=env)
    rows = objects(r.stdout)
    if r.returncode == 0:  # a machine with a sound card: one object per input device
        assert rows and all({"index", "name", "host_api"} <= set(x) for x in rows), rows
    else:
        assert r.returncode == 4, r.stderr
        assert rows == [{"devices": [], "error": rows[0]["error"]}] and "no audio input devices" in rows[0]["error"]


@pytest.mark.parametrize("command,needle", [("scan", '{"type": "summary", "file"'), ("classify", '"classification"'),
                                            ("devices", '{"devices": [], "error"}')])
def test_help_says_what_json_writes(command, needle):
    r = run(command, "--help")
    assert r.returncode == 0 and needle in r.stdout.decode() and "file_hex" in r.stdout.decode()
