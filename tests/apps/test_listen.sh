#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The live microphone path of keyword_spotter end to end, without a sound card
# (docs: testing-audio.md):
#   a. a PulseAudio null sink at 16 kHz whose monitor is the default input; the
#      WAV is played into it in real time; after SIGTERM the program must exit 0
#      and its --json detections must contain the expected labels, in order;
#   b. a JACK dummy server at 48 kHz (only the server's rate opens, so the
#      program must resample to the model's rate itself): same labels;
#   c. --device no-such-device-xyz: exit 4 and the list of input devices;
#   d. `devices` lists the pulse device while the server runs;
#   e. no sound system at all: listen fails with exit 4 within seconds, and
#      listen and devices say so in one line (ALSA's and JACK's noise only with --verbose);
#   f. the sound server dies while listening: exit 4, no hang;
#   g. inference slower than the device (test-only KWS_TEST_CONSUMER_DELAY_MS):
#      the dropped frames are counted and reported, exit 0 after SIGTERM;
#   h. a device that opens but never delivers a frame (ALSA file PCM on a FIFO
#      nobody writes to): exit 4 within seconds, saying so, and the summary
#      says that no audio came;
#   i. a device whose open never returns (the same FIFO without a writer):
#      exit 4 within seconds.
# Only stdout is checked for detections (ALSA and JACK print noise on stderr).
#
#   test_listen.sh KEYWORD_SPOTTER MODEL WAV_WITH_KEYWORDS EXPECTED_LABEL...
#   test_listen.sh KEYWORD_SPOTTER MODEL WAV --any
# EXPECTED_LABELs must appear in this order among the detections (others may
# come between them). --any checks only that audio went through the model:
# exit 0 and the stderr summary "listened S s, C chunks, ..." with C > 0 (for
# untrained models, whose detections are arbitrary).
# LISTEN_EXTRA_ARGS (environment): more options for the listen runs of a and b
# (e.g. --sensitivity 0.9).
# Exit: 0 pass, 1 failure, 2 usage, 77 skipped (PortAudio/PulseAudio tooling missing).
set -u
if [ $# -lt 4 ]; then
  echo "usage: $0 KEYWORD_SPOTTER MODEL WAV_WITH_KEYWORDS EXPECTED_LABEL... | --any" >&2
  exit 2
fi
KS=$1
MODEL=$2
WAV=$3
shift 3
EXPECTED=("$@")
read -r -a EXTRA <<<"${LISTEN_EXTRA_ARGS:-}"
PY=/usr/bin/python3
CHECKS=$(dirname "$0")/listen_checks.py  # the check of the detections

skip() { echo "SKIP: $*"; exit 77; }
for tool in pulseaudio pactl paplay sox "$PY"; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed (apt-get install pulseaudio pulseaudio-utils sox python3)"
done
alsa_plugin() { compgen -G "/usr/lib/*/alsa-lib/libasound_module_pcm_$1.so" >/dev/null || compgen -G "/usr/lib/alsa-lib/libasound_module_pcm_$1.so" >/dev/null; }
alsa_plugin pulse || skip "the ALSA pulse plugin is not installed (apt-get install libasound2-plugins)"
[ -x "$KS" ] || { echo "FAIL: $KS is not an executable"; exit 1; }
[ -f "$MODEL" ] || { echo "FAIL: no model $MODEL"; exit 1; }
[ -f "$WAV" ] || { echo "FAIL: no audio file $WAV"; exit 1; }

T=$(mktemp -d /tmp/ks_listen.XXXXXX)
PIDS=()  # background processes this script started
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
  stop_pulse
  [ -n "${JPID:-}" ] && kill -9 "$JPID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Nothing outside $T: no user sound server, no autospawned one, no JACK autostart.
export HOME=$T/home XDG_RUNTIME_DIR=$T/xdg XDG_CONFIG_HOME=$T/home/.config
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
export PULSE_RUNTIME_PATH=$T/pa/run PULSE_STATE_PATH=$T/pa/state PULSE_SERVER=unix:$T/pa/run/native
printf 'autospawn = no\n' >"$T/client.conf"
export PULSE_CLIENTCONFIG=$T/client.conf
export JACK_NO_START_SERVER=1 JACK_DEFAULT_SERVER=ks_listen_$$
unset ALSA_CONFIG_PATH

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }
now() { date +%s.%N; }
elapsed() { $PY -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }

# wait_exit PID SECONDS: the exit status, or 124 after killing a process that hung.
wait_exit() {
  local pid=$1 i
  for i in $(seq $(($2 * 20))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
}

# wait_until PID SECONDS CMD...: polls CMD every 50 ms until it succeeds (0), PID
# has exited (1) or SECONDS have passed (1). Generous: in a CI run under the sanitizers
# the stream showed up only after a 10 s poll had given up (its detections were right).
wait_until() {
  local pid=$1 limit=$2 i
  shift 2
  for i in $(seq $((limit * 20))); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || { "$@"; return; }
    sleep 0.05
  done
  "$@"
}
pa_has_stream() { pactl list short source-outputs 2>/dev/null | grep -q .; }
jack_has_port() { jack_lsp 2>/dev/null | grep -qx "PortAudio:in_0"; }

# check_output NAME OUT ERR RC: the detections in OUT (JSON lines) against EXPECTED.
check_output() {
  local name=$1 out=$2 err=$3 rc=$4
  if [ "$rc" -eq 0 ]; then pass "$name: exit 0 after SIGTERM"; else fail "$name: exit $rc after SIGTERM, wanted 0"; fi
  grep -a "^listened " "$err" | sed "s/^/      $name: /"
  if ! $PY "$CHECKS" detections_expected "$out" "$err" "${EXPECTED[@]}"; then
    fail "$name: detections"
  else
    pass "$name: detections ${EXPECTED[*]}"
  fi
}

PAPID=
start_pulse() {
  mkdir -p "$T/pa"
  cat >"$T/pa/vmic.pa" <<'PA'
load-module module-native-protocol-unix auth-anonymous=1 auth-cookie-enabled=0
load-module module-null-sink sink_name=vmic rate=16000 channels=1 format=float32le
set-default-sink vmic
set-default-source vmic.monitor
PA
  pulseaudio -n -F "$T/pa/vmic.pa" --daemonize=yes --exit-idle-time=-1 --log-target=file:"$T/pa/pa.log" 2>>"$T/pa/start.err"
  local i
  for i in $(seq 100); do pactl info >/dev/null 2>&1 && break; sleep 0.05; done
  PAPID=$(cat "$PULSE_RUNTIME_PATH/pid" 2>/dev/null)
  pactl info >/dev/null 2>&1
}
stop_pulse() {
  [ -n "$PAPID" ] || return 0
  timeout 5 pactl exit 2>/dev/null
  local i
  for i in $(seq 40); do kill -0 "$PAPID" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$PAPID" 2>/dev/null
  PAPID=
}

sox "$WAV" -c 1 "$T/padded.wav" pad 0.5 0.5 || { echo "FAIL: sox cannot read $WAV"; exit 1; }
t0=$(now)

# --- PulseAudio null sink at 16 kHz: c, d, a, f ---
if ! start_pulse; then
  fail "PulseAudio would not start"
  cat "$T/pa/start.err" "$T/pa/pa.log" 2>/dev/null | tail -20
else
  # d. devices
  "$KS" devices >"$T/dev.out" 2>"$T/dev.err"
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "pulse" "$T/dev.out"; then
    pass "d: devices lists the pulse device"
  else
    fail "d: devices: exit $rc"; cat "$T/dev.out"
  fi

  # c. a device name that matches nothing
  timeout 20 "$KS" listen -m "$MODEL" --device no-such-device-xyz >"$T/c.out" 2>"$T/c.err"
  rc=$?
  if [ "$rc" -eq 4 ]; then pass "c: --device no-such-device-xyz exits 4"; else fail "c: --device no-such-device-xyz: exit $rc, wanted 4"; fi
  if grep -q "no input device matches" "$T/c.err" && grep -q "pulse" "$T/c.err"; then
    pass "c: says no input device matches and lists the devices"
  else
    fail "c: message"; grep -v "^ALSA lib\|^Cannot\|^jack\|^Jack" "$T/c.err"
  fi

  # a. real-time playback into the default input
  "$KS" listen -m "$MODEL" --json "${EXTRA[@]}" >"$T/a.out" 2>"$T/a.err" &
  KSPID=$!
  PIDS+=("$KSPID")
  if ! wait_until "$KSPID" 60 pa_has_stream; then
    fail "a: keyword_spotter's stream never showed up in PulseAudio"
    grep -v "^ALSA lib\|^Cannot\|^jack\|^Jack" "$T/a.err"
  fi
  timeout 60 paplay "$T/padded.wav" || fail "a: paplay failed or did not end within 60 s"
  sleep 1.5  # the last words still travel through the server and the model
  kill -TERM "$KSPID" 2>/dev/null
  wait_exit "$KSPID" 10
  rc=$?
  [ "$rc" -eq 124 ] && fail "a: keyword_spotter did not exit within 10 s of SIGTERM"
  check_output a "$T/a.out" "$T/a.err" "$rc"

  # g. a consumer too slow for the device: frames dropped, counted, reported
  KWS_TEST_CONSUMER_DELAY_MS=1000 "$KS" listen -m "$MODEL" --json >"$T/g.out" 2>"$T/g.err" &
  KSPID=$!
  PIDS+=("$KSPID")
  # the 4 s ring is full about 5 s after the first audio; the warning comes at the next check
  wait_until "$KSPID" 60 grep -aq "falling behind" "$T/g.err"
  kill -TERM "$KSPID" 2>/dev/null
  wait_exit "$KSPID" 10
  rc=$?
  if [ "$rc" -eq 0 ]; then pass "g: slow consumer: exit 0 after SIGTERM"; else fail "g: slow consumer: exit $rc, wanted 0"; fi
  if grep -aq "inference is falling behind the device: [0-9]* frames" "$T/g.err" &&
     grep -aE "^listened .* ([1-9][0-9]*) overflow frames" "$T/g.err" >/dev/null; then
    pass "g: dropped frames reported: $(grep -aoE "[0-9]+ overflow frames" "$T/g.err")"
  else
    fail "g: no overflow report"; grep -av "^ALSA lib\|^Cannot\|^jack\|^Jack" "$T/g.err" | tail -5
  fi

  # f. the sound server dies while listening
  "$KS" listen -m "$MODEL" --json >"$T/f.out" 2>"$T/f.err" &
  KSPID=$!
  PIDS+=("$KSPID")
  wait_until "$KSPID" 60 pa_has_stream
  sleep 2.5  # past the first callback
  kill -9 "$PAPID" 2>/dev/null
  PAPID=
  tf=$(now)
  wait_exit "$KSPID" 10
  rc=$?
  if [ "$rc" -eq 4 ]; then
    pass "f: server killed while listening: exit 4 after $(elapsed "$tf") s"
  else
    fail "f: server killed while listening: exit $rc, wanted 4"
  fi
  grep -q "^keyword_spotter: device" "$T/f.err" || { fail "f: no device error message"; tail -5 "$T/f.err"; }
fi
stop_pulse

# --- b. JACK dummy driver at 48 kHz: the rate fallback ---
if ! command -v jackd >/dev/null || ! command -v jack_wait >/dev/null || ! command -v jack_lsp >/dev/null ||
   ! command -v aplay >/dev/null || ! alsa_plugin jack; then
  echo "SKIP: b (JACK at 48 kHz): needs jackd2, alsa-utils and libasound2-plugins"
else
  jackd --no-realtime -d dummy -r 48000 -p 1024 -C 1 -P 1 >"$T/jackd.log" 2>&1 &
  JPID=$!
  if ! jack_wait -w -t 5 >/dev/null 2>&1; then
    echo "SKIP: b (JACK at 48 kHz): jackd could not start here:"
    tail -5 "$T/jackd.log" | sed 's/^/      /'
  else
    "$KS" listen -m "$MODEL" --json --device system "${EXTRA[@]}" >"$T/b.out" 2>"$T/b.err" &
    KSPID=$!
    PIDS+=("$KSPID")
    if ! wait_until "$KSPID" 60 jack_has_port; then
      fail "b: keyword_spotter's JACK port never showed up"
      grep -v "^ALSA lib\|^Cannot\|^jack\|^Jack" "$T/b.err"
    fi
    printf 'pcm.ks_feed { type plug; slave.pcm { type jack; playback_ports { 0 "PortAudio:in_0" } } }\n' >"$T/feed.conf"
    sox "$T/padded.wav" -r 48000 "$T/padded48.wav"
    # bounded: on a loaded machine a stalled JACK graph once left aplay (or jackd's exit below) waiting
    # until ctest's 300 s timeout, with no word of where; the WAV is 15 s
    ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:$T/feed.conf timeout 60 aplay -q -D ks_feed "$T/padded48.wav" \
      2>"$T/aplay.err" || { fail "b: aplay into JACK failed or did not end within 60 s"; tail -3 "$T/aplay.err"; }
    sleep 1
    kill -TERM "$KSPID" 2>/dev/null
    wait_exit "$KSPID" 10
    rc=$?
    [ "$rc" -eq 124 ] && fail "b: keyword_spotter did not exit within 10 s of SIGTERM"
    if grep -aq "at 48000 Hz, resampled to" "$T/b.err"; then
      pass "b: opened the device at 48000 Hz and resampled"
    else
      fail "b: no rate fallback"; grep -a "listening on" "$T/b.err"
    fi
    check_output b "$T/b.out" "$T/b.err" "$rc"
  fi
  kill "$JPID" 2>/dev/null
  wait_exit "$JPID" 10 >/dev/null 2>&1 || true  # killed after 10 s if it hangs on its way out
  JPID=
fi

# --- e. no sound system at all ---
if [ -s /proc/asound/cards ] && ! grep -q "no soundcards" /proc/asound/cards; then
  echo "SKIP: e (no sound system): this machine has sound cards"
else
  te=$(now)
  env -u PULSE_SERVER PULSE_RUNTIME_PATH="$T/nothing" timeout 30 "$KS" listen -m "$MODEL" --json >"$T/e.out" 2>"$T/e.err"
  rc=$?
  took=$(elapsed "$te")
  if [ "$rc" -eq 4 ] && $PY -c "import sys; sys.exit(float(sys.argv[1]) > 12)" "$took"; then
    pass "e: no sound system: exit 4 after $took s"
  else
    fail "e: no sound system: exit $rc after $took s, wanted 4 within 12 s"
    grep -v "^ALSA lib\|^Cannot\|^jack\|^Jack" "$T/e.err" | tail -5
  fi
  [ -s "$T/e.out" ] && fail "e: printed on stdout: $(head -c 200 "$T/e.out")"
  # one clear line, not ~100 lines of ALSA and JACK diagnostics (those only with --verbose)
  for cmd in "listen -m $MODEL" "devices"; do
    env -u PULSE_SERVER PULSE_RUNTIME_PATH="$T/nothing" timeout 30 "$KS" $cmd >/dev/null 2>"$T/e.err"
    rc=$?
    n=$(wc -l <"$T/e.err")
    if [ "$rc" -eq 4 ] && [ "$n" -le 2 ] && grep -q "no audio input devices" "$T/e.err"; then
      pass "e: ${cmd%% *} without a sound system: $n line(s) on stderr: $(head -c 200 "$T/e.err")"
    else
      fail "e: ${cmd%% *} without a sound system: exit $rc, $n lines on stderr, wanted 4 and at most 2"; head -5 "$T/e.err"
    fi
  done
  env -u PULSE_SERVER PULSE_RUNTIME_PATH="$T/nothing" timeout 30 "$KS" devices --verbose >/dev/null 2>"$T/e.err"
  [ "$(wc -l <"$T/e.err")" -gt 2 ] && pass "e: devices --verbose shows the libraries' messages" ||
    fail "e: devices --verbose: $(wc -l <"$T/e.err") lines on stderr, wanted the libraries' messages"
fi

# --- h, i. a device that never delivers, a device whose open never returns ---
# ALSA's file PCM reads its capture data from a FIFO (testing-audio.md, B).
if ! command -v mkfifo >/dev/null; then
  echo "SKIP: h, i: no mkfifo"
else
  mkfifo "$T/mic.fifo"
  cat >"$T/fifomic.conf" <<CONF
pcm.!default { type plug; slave { pcm { type file; slave.pcm { type null }; file "/dev/null"
  infile "$T/mic.fifo"; format "raw" } format FLOAT_LE rate 16000 channels 1 } }
CONF
  # fifo_listen NAME NEEDLE WHAT: listen on the FIFO device must exit 4 within 15 s, NEEDLE on stderr
  fifo_listen() {
    local t rc took
    t=$(now)
    env -u PULSE_SERVER PULSE_RUNTIME_PATH="$T/nothing" ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:$T/fifomic.conf \
      timeout 40 "$KS" listen -m "$MODEL" --device default --json >"$T/$1.out" 2>"$T/$1.err"
    rc=$?
    took=$(elapsed "$t")
    if [ "$rc" -eq 4 ] && grep -aq "$2" "$T/$1.err" && $PY -c "import sys; sys.exit(float(sys.argv[1]) > 15)" "$took"; then
      pass "$1: $3: exit 4 after $took s, '$2'"
    else
      fail "$1: $3: exit $rc after $took s, wanted 4 within 15 s and '$2'"
      grep -av "^ALSA lib\|^Cannot\|^jack\|^Jack" "$T/$1.err" | tail -5
    fi
  }
  # h. opens, starts, never delivers: a writer holds the FIFO open and writes nothing
  sleep 60 >"$T/mic.fifo" &
  PIDS+=("$!")
  fifo_listen h "no audio from the device within" "device never delivers"
  kill "${PIDS[-1]}" 2>/dev/null
  # no frame came: the summary must not claim "first audio 0.00 s after start" (issue 85 item 11)
  if grep -aq "^no audio came from the device; " "$T/h.err" && ! grep -aq "first audio" "$T/h.err"; then
    pass "h: the summary says that no audio came"
  else
    fail "h: the summary claims audio that never came"; grep -a "audio" "$T/h.err" | tail -3
  fi
  # i. no writer at all: opening the FIFO blocks inside ALSA
  fifo_listen i "did not finish within" "device open never returns"
fi

echo "test_listen: $(elapsed "$t0") s"
if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all listen tests passed"
