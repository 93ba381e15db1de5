# SPDX-License-Identifier: Apache-2.0
"""Festival kept running: one `festival --pipe` process per voice renders many words.

`text2wave` starts festival, loads its voice and renders one text; for a single word the
start takes 1 to 3 s and the rendering about 50 ms (0.4-0.9 s for the Indic NSK voices), so
a dataset of festival words spent most of its time starting festival. `Renderer.render`
does what

    text2wave -eval "(voice_NAME)" -eval "(Parameter.set 'Duration_Stretch S)" -o OUT TXT

does, from one process per voice that stays up:

  * the voice is selected once, when its process starts, as text2wave does: some voice
    functions are not idempotent (calling a Czech voice again lengthens its words), so a
    process never switches voice;
  * the Scheme random generator is seeded with 1 before every rendering, and the Czech
    voices' cached range of `rand` is forgotten: text2wave renders in a new process, whose
    generator starts from seed 1 (the Czech voices draw intonation and pauses from it);
  * the rendering is text2wave's own: `tts_file` with the text mode it would pick, and hooks
    that write the riff header, the samples, and then the header again with the count.

A process's first word was text2wave's bytes in every test; later ones are not always: festival
keeps some state between utterances that these resets do not reach, and which words it
touches depends on what the process rendered before (even on the lengths of the file
names). What was measured against text2wave:

  * 400 random words, stretches and file names over the 14 festival voices of the pool:
    12 words differed, all with the same length. In the Czech voices and kal_diphone (9)
    the largest sample difference was 0.07-0.26 % of the word's peak; in
    hindi_NSK_diphone (3) it was 2.4-4.6 %, so the three NSK voices (FRESH_PROCESS) are
    rendered by text2wave even here;
  * the 252 Finnish mv words of a held-out near-miss run, in order, from one process: 5 of
    the first 45 differed, each in its last 0.1 s, a quiet tail (RMS about 2.5 % of the
    peak) that came out silent; the word, trimmed, is then up to 0.1 s shorter. In the whole
    run (2,384 clips, two workers) 52 clips differed from the text2wave run's, 47 of
    them of that voice.

So make_sc10.py uses it only when asked (--festival pipe), for training clips where a few
clipped tails do no harm; clips that measure models render with text2wave.

Tried and left: `festival --server` with the voice loaded forks a fresh child for each
connection, and rendered those 45 mv words exactly as text2wave did; but there tts_file
took about 5 s a word (of computing, not waiting; the reason was not found), slower than
text2wave itself.
"""
import os
import select
import subprocess
import time

_SCHEME = r"""
(defvar mega_fp nil)
(defvar mega_n 0)
(defvar mega_utt nil)
(define (mega_save utt)
  (if (eq? mega_n 0)
      (wave.save.header mega_fp (utt.wave utt) 'riff nil (list (list "numsamples" 0))))
  (set! mega_n (+ mega_n (get_param 'num_samples (wave.info (utt.wave utt)) 0)))
  (wave.save.data.fp (utt.wave utt) mega_fp 'riff nil)
  (set! mega_utt utt))
(define (mega_t2w stretch txt out)
  (srand 1)
  (if (boundp 'czech-rand-range) (set! czech-rand-range nil))
  (set! tts_hooks (list utt.synth mega_save))
  (Parameter.set 'Duration_Stretch stretch)
  (set! mega_n 0)
  (set! mega_utt nil)
  (set! mega_fp (fopen out "wb"))
  (tts_file txt (tts_find_text_mode txt auto-text-mode-alist))
  (fseek mega_fp 0 0)
  (wave.save.header mega_fp (utt.wave mega_utt) 'riff nil (list (list "numsamples" mega_n)))
  (fclose mega_fp)
  (set! mega_fp nil))
(define (mega_say tag stretch txt out)
  (format t "%s %s\n" tag
          (unwind-protect (begin (mega_t2w stretch txt out) t)
                          (begin (if mega_fp (fclose mega_fp)) (set! mega_fp nil) nil)))
  (fflush nil))
"""


# Voices whose words drifted most in a kept process (up to 4.6 % of the word's peak); they
# are slow to render anyway (0.4-0.9 s a word kept, 1.1-1.5 s by text2wave).
FRESH_PROCESS = frozenset({"hindi_NSK_diphone", "marathi_NSK_diphone", "telugu_NSK_diphone"})


def _scheme_string(s: str) -> str:
    if '"' in s or "\\" in s or "\n" in s:
        raise ValueError(f"festival_pipe: path not passable to Scheme: {s!r}")
    return f'"{s}"'


class _Voice:
    """One festival process with one voice selected."""

    def __init__(self, voice: str):
        if not voice.replace("_", "").isalnum():
            raise ValueError(f"festival_pipe: odd voice name {voice!r}")
        self.voice = voice
        self.p = None
        self.n = 0

    def _start(self):
        self.p = subprocess.Popen(["festival", "--pipe"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
        self.p.stdin.write(_SCHEME + f"\n(voice_{self.voice})\n")
        self.p.stdin.flush()

    def stop(self):
        if self.p is not None:
            self.p.kill()
            self.p.wait()
            self.p = None

    def render(self, stretch, txt: str, out: str, timeout: float) -> bool:
        if self.p is None or self.p.poll() is not None:
            self._start()
        self.n += 1
        tag = f"mega_done_{self.n}"
        try:
            self.p.stdin.write(f'(mega_say "{tag}" {stretch} {_scheme_string(txt)} {_scheme_string(out)})\n')
            self.p.stdin.flush()
        except BrokenPipeError:
            self.stop()
            return False
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                self.stop()  # hung: the next call starts a new one
                return False
            line = self.p.stdout.readline()
            if not line:  # festival died
                self.stop()
                return False
            if line.startswith(tag + " "):
                return line.split()[1] == "t"


def text2wave(voice: str, stretch, txt: str, out: str, timeout: float = 60.0) -> bool:
    """The same rendering by text2wave, a new festival process."""
    cmd = ["text2wave", "-eval", f"(voice_{voice})", "-eval", f"(Parameter.set 'Duration_Stretch {stretch})",
           "-o", out, txt]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=timeout).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class Renderer:
    """Festival voices on demand, one process each, owned by the process that started them
    (after a fork the child starts its own: pipes are not shared). The voices of
    FRESH_PROCESS render by text2wave all the same."""

    def __init__(self):
        self.pid = os.getpid()
        self.voices = {}

    def render(self, voice: str, stretch, txt: str, out: str, timeout: float = 60.0) -> bool:
        """Render the text in file `txt` into riff file `out`; False when festival failed or
        took longer than `timeout` seconds (as text2wave's exit status would say)."""
        if voice in FRESH_PROCESS:
            return text2wave(voice, stretch, txt, out, timeout)
        if os.getpid() != self.pid:
            self.pid, self.voices = os.getpid(), {}
        v = self.voices.get(voice)
        if v is None:
            v = self.voices[voice] = _Voice(voice)
        return v.render(stretch, txt, out, timeout)

    def close(self):
        if os.getpid() == self.pid:
            for v in self.voices.values():
                v.stop()
        self.voices = {}
