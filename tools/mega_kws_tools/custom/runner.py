# SPDX-License-Identifier: Apache-2.0
"""The custom-keyword run: its options, its folder, and the stages in order,
each skipped when its result is already in the folder (a resumed run)."""

import json
import os
import sys

import numpy as np
import torch

from mega_kws_tools.custom import fit
from mega_kws_tools.custom import frontends
from mega_kws_tools.custom import package as pk
from mega_kws_tools.custom import stages as st
from mega_kws_tools.custom.paths import ROOT, STAGES
from mega_kws_tools.custom.progress import Stage
from mega_kws_tools.data.sc10_clips import espeak_variants


class Run:
    def __init__(self, args, labels, work, text):
        self.args, self.labels, self.work, self.text = args, labels, work, text
        self.seed, self.near, self.renders, self.copies = args.seed, args.near, args.renders, args.copies
        self.held_out, self.voices, self.steps, self.threads = args.held_out, args.voices, args.steps, args.threads
        self.max_fa_per_hour, self.data, self.recordings = args.max_fa_per_hour, args.data, args.recordings
        self.n_classes = len(labels) + 2
        self.non_speech = max(20, args.renders // 2)  # tones, noise, silence: the _silence_ class
        self.silence, self.unknown = len(labels), len(labels) + 1
        self.variants = None
        self._recordings = None
        self.times = {}

    # ------------------------------------------------------------------ helpers for the stages
    def said_like(self, words):
        """The keywords and the words said exactly like them (never negatives)."""
        return set(self.labels) | {h for hs in words["homophones"].values() for h in hs}

    def recordings_list(self):
        """[(class, file name, audio)] of --recordings."""
        if self._recordings is None:
            self._recordings = st.load_recordings(self.recordings, self.labels)
        return self._recordings

    def path(self, name):
        return os.path.join(self.text if name in ("words.json", "renders.npz") else self.work, name)

    # ------------------------------------------------------------------ the run
    def run_all(self) -> int:
        torch.set_num_threads(self.threads)
        self.recordings_list()  # a --recordings folder without a usable clip is refused before any work
        self.fe = frontends.load(self.args)
        if self.fe is None:
            return 2
        self.hop_s = self.fe.hop_s
        self.cache = os.path.join(ROOT, "work", "custom", "cache", self.fe.cache_key)
        for d in (self.work, self.text, self.cache):
            os.makedirs(d, exist_ok=True)
        print(f"custom keyword model for {', '.join(repr(x) for x in self.labels)} on {self.fe.description}; "
              f"run folder {self.work}", file=sys.stderr)
        for i, name in enumerate(STAGES, 1):
            rc = getattr(self, f"stage_{name}")(i)
            if rc:
                return rc
            if self.args.stop_after == name:
                print(f"stopped after stage {name}; run the same command again to go on", file=sys.stderr)
                return 0
        return 0

    def _timed(self, i, name, total, fn, note=""):
        bar = Stage(i, len(STAGES), name, total)
        result = fn(bar)
        self.times[name] = bar.done(note(result) if callable(note) else note)
        return result

    def _skip(self, i, name, path):
        if os.path.exists(path):
            print(f"[{i}/{len(STAGES)}] {name:<8} done before (resumed)", file=sys.stderr)
            return True
        return False

    def stage_words(self, i):
        if not self._skip(i, "words", self.path("words.json")):
            words = self._timed(i, "words", len(self.labels), lambda bar: st.words_stage(self, bar),
                                lambda w: f"{sum(len(v) for v in w['near'].values())} near misses")
            st.save_json(self.path("words.json"), words)
        with open(self.path("words.json")) as f:
            self.words = json.load(f)
        return 0

    def stage_render(self, i):
        path = self.path("renders.npz")
        if not self._skip(i, "render", path):
            self.variants = espeak_variants()
            jobs, meta = st.render_jobs(self, self.words)
            audio, lengths, info, failed = self._timed(i, "render", len(jobs),
                                                       lambda bar: st.render_stage(self, jobs, meta, bar),
                                                       lambda r: f"{len(r[1])} clips, {len(r[3])} failed")
            st.save_npz(path, audio=audio, lengths=lengths, info=np.array(json.dumps(info)))
        z = np.load(path)
        self.renders = (z["audio"], z["lengths"], json.loads(str(z["info"])))
        return 0

    def stage_speech(self, i):
        have = os.path.exists(os.path.join(self.cache, "speech_training.npz"))
        def both(bar):
            return (st.speech_cache(self, self.fe, lambda d: bar(d / 2)),
                    st.real_word_cache(self, self.fe, lambda d: bar(0.5 + d / 2)))

        def note(r):
            hops, (words, _) = r
            speech = "no real speech under --data" if hops is None else \
                f"{len(hops[0])} windows of real speech{' (cached)' if have else ''}"
            return f"{speech}, {len(words)} real clips of other words"
        self.speech_hops, self.real_words = self._timed(i, "speech", 1.0, both, note)
        return 0

    def stage_embed(self, i):
        path = self.path("examples.npz")
        if not self._skip(i, "embed", path):
            parts = self._timed(i, "embed", 1.0,
                                lambda bar: fit.embed_stage(self, self.words, self.renders, self.speech_hops,
                                                            self.real_words, bar),
                                lambda p: f"{len(p['y'])} examples")
            st.save_npz(path, **parts)
        self.parts = dict(np.load(path))
        return 0

    def stage_train(self, i):
        path = self.path("model.pt")
        if not self._skip(i, "train", path):
            model = self._timed(i, "train", self.steps, lambda bar: fit.train_stage(self, self.parts, bar))
            torch.save(model.state_dict(), path + ".tmp")
            os.replace(path + ".tmp", path)
        self.model = self.fe.new_model(self.n_classes)
        self.model.load_state_dict(torch.load(path))
        self.model.eval()
        return 0

    def stage_tune(self, i):
        path = self.path("detection.json")
        if not self._skip(i, "tune", path):
            det, figs, hours = self._timed(i, "tune", 1.0, lambda bar: fit.tune_stage(self, self.model, self.parts,
                                                                                      self.hop_s))
            st.save_json(path, {"detection": det, "tuning": {self.labels[k]: v for k, v in figs.items()},
                                "tuning_hours": hours})
        with open(path) as f:
            self.tuned = json.load(f)
        return 0

    def stage_write(self, i):
        self.ks = pk.find_runtime(self.args.keyword_spotter, ROOT)

        def write(bar):
            pk.write_model(self, self.model, self.tuned["detection"], self.args.out)
            if not self.ks:
                return False, "keyword_spotter not found (build it: bash scripts/demo.sh, or --keyword-spotter)"
            ok, msg = pk.self_test(self.ks, self.args.out)
            if ok:  # a model that misses its held-out renderings still works: say so, the figures follow
                msg = f"{msg}; {pk.check_detects(self.ks, self.args.out, self.renders, self.labels)[1]}"
            return ok, msg
        ok, msg = self._timed(i, "write", 1.0, write, lambda r: r[1])
        if not ok:
            print(f"mega_kws_tools.custom: {self.args.out}: {msg}", file=sys.stderr)
            return 1
        return 0

    def stage_measure(self, i):
        def measure(bar):
            rec = pk.recall_of(self.ks, self.args.out, pk.hold_out_clips(self.renders), self.labels)
            bar(0.5)
            return rec, pk.false_alarm_rate(self.ks, self.args.out, self.data, self.said_like(self.words))
        rec, fa = self._timed(i, "measure", 1.0, measure)
        self.report(rec, fa)
        return 0

    def report(self, rec, fa):
        det = self.tuned["detection"]
        print(f"wrote {self.args.out}: labels {', '.join(self.labels)}; thresholds "
              f"{' '.join(f'{t:.3f}' for t in det['thresholds'][:len(self.labels)])}, smoothing "
              f"{det['smoothing_hops']} hops")
        for label in self.labels:
            d, n = rec.get(label, (0, 0))
            print(f"  {label}: found in {d} of {n} clips of a text-to-speech voice no stage used "
                  f"(espeak-ng {pk_test_voice()}) at the defaults")
        if fa is None:
            print("  false alarms on real keyword-free speech: not measured (no work/data/so762 under --data)")
        else:
            print(f"  false alarms: {fa[0]} in {fa[1]:.2f} h of real validation speakers' keyword-free speech "
                  f"({fa[0] / fa[1]:.2f} per hour)")
        print("  accuracy on real people saying the new keyword is not known: only your own recordings can "
              "tell (docs/custom-keywords.md)")
        total = sum(self.times.values())
        print(f"  time: {total:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in self.times.items()) + ")")


def pk_test_voice():
    from mega_kws_tools.custom.render import TEST_VOICE
    return TEST_VOICE
