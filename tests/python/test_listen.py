#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mega_kws.listen and mega_kws.devices (python/mega_kws/_listen.py over
libmega_kws_audio) without a sound card, the way tests/apps/test_listen.sh tests
keyword_spotter listen (docs: testing-audio.md): a PulseAudio null sink at
16 kHz whose monitor is the default input, the clip played into it in real
time.

  - the README's listen example hears the words of samples/commands.wav, in
    order, and Ctrl-C (SIGINT) ends it at once;
  - close(), or dropping the last reference, releases the device while the
    program goes on; a closed microphone iterates no more;
  - devices() lists the pulse device; a device name matching nothing is
    MegaError NO_DEVICE listing the devices;
  - the sound server dying mid-stream is MegaError DEVICE within seconds;
  - no sound system at all: devices() is empty, listen() raises MegaError
    NO_DEVICE at once, and nothing of ALSA's or JACK's noise reaches stderr
    (verbose=True lets it through);
  - without libmega_kws_audio, an OSError saying what is missing.

Every microphone runs in a child process with its own environment (sound
server, HOME), as the CLI's test does. Run by ctest (test python_listen) with
MEGA_KWS_LIBRARY set; by hand: /usr/bin/python3 -m pytest
tests/python/test_listen.py (defaults: build/)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import mega_kws  # python/ is on the path (pytest.ini)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # tests/tools/ -> the root
DEMO = os.path.join(ROOT, "models", "sc10-demo.mega")
COMMANDS = os.path.join(ROOT, "samples", "commands.wav")  # yes stop go left no
WORDS = ["yes", "stop", "go", "left", "no"]
os.environ.setdefault("MEGA_KWS_LIBRARY", os.path.join(ROOT, "build", "libmega_kws.so"))
LIBRARY = os.environ["MEGA_KWS_LIBRARY"]
NOISE = ("ALSA lib", "Cannot", "jack", "Jack", "JackShm")


def _alsa_plugin(name):
    return any(os.path.exists(os.path.join(d, f"libasound_module_pcm_{name}.so"))
               for d in ["/usr/lib/alsa-lib"] + [os.path.join("/usr/lib", t, "alsa-lib") for t in os.listdir("/usr/lib")])


def _has_sound_cards():
    try:
        with open("/proc/asound/cards") as f:
            first = f.readline()
    except OSError:
        return False
    return bool(first) and "no soundcards" not in first


@pytest.fixture
def env(tmp_path):
    """The children's environment: nothing outside tmp_path (no user sound
    server, none autospawned, no JACK started), the package from the source
    tree over this build's library; PulseAudio's socket where pulse() starts it."""
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    xdg.mkdir(mode=0o700)
    (tmp_path / "client.conf").write_text("autospawn = no\n")
    pa = tmp_path / "pa"
    e = {k: v for k, v in os.environ.items() if k not in ("ALSA_CONFIG_PATH", "PYTHONPATH")}
    e.update(HOME=str(home), XDG_RUNTIME_DIR=str(xdg), XDG_CONFIG_HOME=str(home / ".config"),
             PULSE_RUNTIME_PATH=str(pa / "run"), PULSE_STATE_PATH=str(pa / "state"),
             PULSE_SERVER=f"unix:{pa}/run/native", PULSE_CLIENTCONFIG=str(tmp_path / "client.conf"),
             JACK_NO_START_SERVER="1", JACK_DEFAULT_SERVER=f"mega_kws_pytest_{os.getpid()}",
             PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1", MEGA_KWS_LIBRARY=LIBRARY)
    return e


@pytest.fixture
def pulse(env, tmp_path):
    """A PulseAudio server with a 16 kHz null sink whose monitor is the default input."""
    for tool in ("pulseaudio", "pactl", "paplay", "sox"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (apt-get install pulseaudio pulseaudio-utils sox)")
    if not _alsa_plugin("pulse"):
        pytest.skip("the ALSA pulse plugin is not installed (apt-get install libasound2-plugins)")
    pa = tmp_path / "pa"
    pa.mkdir()
    (pa / "vmic.pa").write_text("load-module module-native-protocol-unix auth-anonymous=1 auth-cookie-enabled=0\n"
                                "load-module module-null-sink sink_name=vmic rate=16000 channels=1 format=float32le\n"
                                "set-default-sink vmic\nset-default-source vmic.monitor\n")
    subprocess.run(["pulseaudio", "-n", "-F", str(pa / "vmic.pa"), "--daemonize=yes", "--exit-idle-time=-1",
                    f"--log-target=file:{pa}/pa.log"], env=env, check=True, capture_output=True)
    try:
        assert _wait(lambda: _pactl(env, "info").returncode == 0, 5), "PulseAudio did not answer"
        yield env
    finally:
        _stop_pulse(env, pa)


def _pactl(env, *args):
    return subprocess.run(["pactl", *args], env=env, capture_output=True, text=True)


def _stop_pulse(env, pa):
    pid_file = pa / "run" / "pid"
    pid = int(pid_file.read_text()) if pid_file.exists() else None
    _pactl(env, "exit")
    if pid and not _wait(lambda: not os.path.exists(f"/proc/{pid}"), 2):
        os.kill(pid, signal.SIGKILL)


def _wait(cond, seconds, proc=None):
    """Polls cond every 50 ms: True once it holds, False after `seconds` or once proc has exited."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        if proc is not None and proc.poll() is not None:
            return cond()
        time.sleep(0.05)
    return cond()


def _has_stream(env):
    return bool(_pactl(env, "list", "short", "source-outputs").stdout.strip())


def _child(env, program, *args, stdin=None):
    return subprocess.Popen([sys.executable, "-c", program, *args], env=env, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, seconds=10):
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the child did not exit within {seconds} s\nstdout: {out}\nstderr: {err[-2000:]}")
    return out, err


def _readme_listen_example():
    text = open(os.path.join(ROOT, "README.md")).read()
    return text.split("<!-- example: python-listen -->\n```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_listen_example_hears_the_played_words(pulse, tmp_path):
    example = _readme_listen_example()
    assert "mega_kws.listen(" in example and len(example.splitlines()) <= 8
    padded = str(tmp_path / "padded.wav")
    subprocess.run(["sox", COMMANDS, "-c", "1", padded, "pad", "0.5", "0.5"], check=True)
    proc = _child(pulse, example, DEMO)
    try:
        assert _wait(lambda: _has_stream(pulse), 60, proc), "the example's stream never showed up in PulseAudio"
        subprocess.run(["paplay", padded], env=pulse, check=True)
        time.sleep(1.5)  # the last word still travels through the server and the model
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = _finish(proc)
    assert "KeyboardInterrupt" in err, err[-2000:]
    rows = [line.split("\t") for line in out.splitlines()]
    labels, times = [r[1] for r in rows], [float(r[0]) for r in rows]
    assert times == sorted(times)
    it = iter(labels)
    assert all(w in it for w in WORDS), f"wanted {WORDS} in order, heard {labels}"  # others may come between


CLOSE = r"""
import gc, sys
import mega_kws
mic = mega_kws.listen(sys.argv[1])
print("open", mic.device_name, mic.device_rate, flush=True)
sys.stdin.readline()
if sys.argv[2] == "close":
    mic.close()
    assert list(mic) == [] and repr(mic) == "Microphone(closed)"
else:  # the last reference dropped
    del mic
    gc.collect()
print("closed", flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("how", ["close", "collect"])
def test_the_microphone_closes_when_closed_or_collected(pulse, how):
    proc = _child(pulse, CLOSE, DEMO, how, stdin=subprocess.PIPE)
    try:
        opened = proc.stdout.readline()
        assert opened.startswith("open "), proc.stderr.read()[-2000:]
        assert "16000" in opened  # the null sink runs at the model's rate: no resampling
        assert _wait(lambda: _has_stream(pulse), 60, proc), "the stream never showed up in PulseAudio"
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "closed\n", proc.stderr.read()[-2000:]
        # the child lives on; its stream is gone
        assert _wait(lambda: not _has_stream(pulse), 5), "the device stayed open after " + how
        assert proc.poll() is None
        proc.stdin.write("\n")
        proc.stdin.flush()
    finally:
        _finish(proc)
    assert proc.returncode == 0


NAMED = r"""
import dataclasses, json, sys
import mega_kws
print(json.dumps([dataclasses.asdict(d) for d in mega_kws.devices()]))
try:
    mega_kws.listen(sys.argv[1], device="no-such-device-xyz")
except mega_kws.MegaError as e:
    print(json.dumps({"status": e.status.name, "message": e.message}))
"""


def test_devices_and_a_device_matching_nothing(pulse):
    out, err = _finish(_child(pulse, NAMED, DEMO))
    lines = out.splitlines()
    assert len(lines) == 2, out + err[-2000:]
    devices, error = json.loads(lines[0]), json.loads(lines[1])
    assert any("pulse" in d["name"] for d in devices), devices
    assert error["status"] == "NO_DEVICE"
    assert "no input device matches 'no-such-device-xyz'" in error["message"]
    assert "pulse" in error["message"]  # the devices there are


LOST = r"""
import sys, time
import mega_kws
mic = mega_kws.listen(sys.argv[1])
print("open", flush=True)
try:
    for d in mic:
        pass
except mega_kws.MegaError as e:
    print(e.status.name, repr(mic), e.message, flush=True)
"""


def test_the_sound_server_dying_is_a_device_error(pulse, tmp_path):
    proc = _child(pulse, LOST, DEMO)
    try:
        assert proc.stdout.readline() == "open\n", proc.stderr.read()[-2000:]
        assert _wait(lambda: _has_stream(pulse), 60, proc)
        time.sleep(2.5)  # past the first callback
    finally:
        pid = int((tmp_path / "pa" / "run" / "pid").read_text())
        os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    out, err = _finish(proc, 15)
    assert out.startswith("DEVICE Microphone(closed) "), out + err[-2000:]
    assert time.monotonic() - t0 < 10


NONE = r"""
import json, sys, time
import mega_kws
verbose = sys.argv[2] == "verbose"
print(json.dumps(mega_kws.devices(verbose=verbose)), flush=True)
t0 = time.monotonic()
try:
    mega_kws.listen(sys.argv[1], verbose=verbose)
except mega_kws.MegaError as e:
    print(json.dumps({"status": e.status.name, "message": e.message, "seconds": time.monotonic() - t0}))
"""


@pytest.mark.skipif(_has_sound_cards(), reason="this machine has sound cards")
def test_no_sound_system_is_a_clear_error_at_once(env):
    # env: PulseAudio's socket names a server nobody started
    out, err = _finish(_child(env, NONE, DEMO, "quiet"), 30)
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0] == "[]", out + err[-2000:]
    error = json.loads(lines[1])
    assert error["status"] == "NO_DEVICE" and error["seconds"] < 10
    assert error["message"].startswith("there is no default input device: no audio input devices"), error
    assert err == "", "ALSA's or JACK's noise on stderr:\n" + err[-2000:]
    # verbose=True lets the libraries' own messages through (so the check above can fail)
    out, err = _finish(_child(env, NONE, DEMO, "verbose"), 30)
    assert json.loads(out.splitlines()[1])["status"] == "NO_DEVICE"
    assert any(line.startswith(NOISE) for line in err.splitlines()), err[-2000:]


def test_without_the_microphone_library_an_oserror_says_so(env):
    env = dict(env, MEGA_KWS_AUDIO_LIBRARY="/nonexistent/libmega_kws_audio.so.0")
    program = "import sys, mega_kws\ntry:\n    mega_kws.listen(sys.argv[1])\nexcept OSError as e:\n    print(e)\n"
    out, err = _finish(_child(env, program, DEMO))
    assert out.startswith("cannot load libmega_kws_audio, the microphone library"), out + err
    assert "/nonexistent/libmega_kws_audio.so.0" in out


STALLED = r"""
import sys, time
import mega_kws
mic = mega_kws.listen(sys.argv[1], device="default")
t0 = time.monotonic()
try:
    for d in mic:
        pass
except mega_kws.MegaError as e:
    print(e.status.name, repr(mic), e.message, flush=True)
print("returned after %.1f s" % (time.monotonic() - t0), flush=True)
"""


def test_a_device_that_never_delivers_is_an_error_not_a_hang(env, tmp_path):
    """The ALSA file PCM reading a FIFO that a writer holds open and never
    writes to (test_listen.sh h): the device opens, starts and delivers
    nothing; PortAudio's capture thread is stuck in a read, so closing the
    stream does not return either. The iteration must end with DEVICE and
    the program go on."""
    fifo = tmp_path / "mic.fifo"
    os.mkfifo(fifo)
    conf = tmp_path / "fifomic.conf"
    conf.write_text('pcm.!default { type plug; slave { pcm { type file; slave.pcm { type null }; file "/dev/null"\n'
                    f'  infile "{fifo}"; format "raw" }} format FLOAT_LE rate 16000 channels 1 }} }}\n')
    writer = os.open(fifo, os.O_RDWR)  # a writer that writes nothing (O_RDWR: the open does not wait for a reader)
    try:
        out, err = _finish(_child(dict(env, ALSA_CONFIG_PATH=f"/usr/share/alsa/alsa.conf:{conf}"), STALLED, DEMO), 40)
    finally:
        os.close(writer)
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("DEVICE Microphone(closed) "), out + err[-2000:]
    assert "no audio from the device within 5 s" in lines[0]
    assert float(lines[1].split()[2]) < 15, lines[1]


def test_bad_arguments_are_refused_before_any_device_opens():
    with pytest.raises(TypeError, match="device must be a name"):
        mega_kws.listen(DEMO, device=1.5)
    with pytest.raises(mega_kws.InvalidArgumentError, match="device index must be >= 0"):
        mega_kws.listen(DEMO, device=-1)
    with pytest.raises(mega_kws.InvalidArgumentError, match="threshold"):  # the Detector's own checks
        mega_kws.listen(DEMO, threshold=2)
    with pytest.raises(mega_kws.MegaError) as e:
        mega_kws.listen(os.path.join(ROOT, "tests", "fixtures", "data", "tiny_bi.mega"))
    assert e.value.status == mega_kws.Status.NOT_STREAMABLE and "bidirectional" in e.value.message
