#!/usr/bin/python3
"""The synthetic data's voice pool: reserved voices are refused by name, and the
splits are voice-disjoint (no voice group in two splits)."""

import csv
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the tools package

from tools.data import make_sc10  # noqa: E402
from tools.data import voices as vc  # noqa: E402

RESERVED = ["awb", "rms", "slt", "cmu_us_awb_arctic", "cmu_us_rms_arctic", "cmu_us_slt_arctic_hts",
            "us_slt_hts", "festvox-us-slt-hts", "festvox-kdlpc16k", "festvox-kdlpc8k", "kdlpc16k", "ked_diphone"]
ALLOWED = ["kal", "kal16", "kal_diphone", "czech_dita", "upc_ca_ona_hts", "msu_ru_nsh_clunits", "en-us", "f3",
           "Storm", "klatt4", "hindi_NSK_diphone"]


class ReservedVoices(unittest.TestCase):
    def test_reserved_names(self):
        for name in RESERVED:
            self.assertTrue(vc.is_reserved(name), name)
            with self.assertRaises(ValueError):
                vc.check_allowed("flite", name)
        for name in ALLOWED:
            self.assertFalse(vc.is_reserved(name), name)

    def test_pool_has_none(self):
        for v in vc.VOICES:
            self.assertFalse(vc.is_reserved(v.name), v.id)
        with self.assertRaises(ValueError):
            vc.Voice("festival", "cmu_us_slt_arctic_hts", "x", "english", "natural")

    def test_generator_refuses_before_running_an_engine(self):
        for engine, voice, variant in (("flite", "slt", ""), ("flite", "awb", ""), ("festival", "ked_diphone", ""),
                                       ("festival", "cmu_us_slt_arctic_hts", ""), ("espeak-ng", "en-us", "rms")):
            with self.assertRaises(ValueError, msg=f"{engine}:{voice}+{variant}"):
                make_sc10.synthesize(dict(engine=engine, voice=voice, variant=variant, rate=1.0, pitch=100), "yes")


class Splits(unittest.TestCase):
    def test_groups_in_one_split(self):
        split_of_group = {}
        for v in vc.VOICES:
            self.assertEqual(split_of_group.setdefault(v.group, vc.split_of(v)), vc.split_of(v), v.group)
        for split in vc.SPLITS:
            self.assertTrue(vc.voices_of(split), split)
        # voices of one recorded speaker share a group
        groups = {v.id: v.group for v in vc.VOICES}
        self.assertEqual(groups["flite:kal"], groups["festival:kal_diphone"])
        self.assertEqual(groups["festival:hindi_NSK_diphone"], groups["festival:telugu_NSK_diphone"])

    def test_every_voice_reads_every_keyword(self):
        for v in vc.VOICES:
            for w in vc.KEYWORDS:
                self.assertTrue(v.text_for(w), (v.id, w))
            self.assertTrue(vc.unknown_words_for(v, ["bed"]), v.id)

    def _manifest(self, rows, lists):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "manifest.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["path", "split", "engine", "voice", "variant"])
            w.writeheader()
            w.writerows(rows)
        for split in ("validation", "testing"):
            with open(os.path.join(d, f"{split}_list.txt"), "w") as f:
                f.writelines(p + "\n" for p, s in lists.items() if s == split)
        return d

    def test_check_splits_catches_a_shared_voice(self):
        tool = os.path.join(ROOT, "tools", "data", "check_splits.py")
        good = [dict(path="yes/a.wav", split="training", engine="espeak-ng", voice="en-us", variant="f2"),
                dict(path="yes/b.wav", split="testing", engine="festival", voice="czech_dita", variant="")]
        d = self._manifest(good, {"yes/b.wav": "testing"})
        r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        bad = good + [dict(path="no/c.wav", split="training", engine="festival", voice="czech_dita", variant="")]
        d = self._manifest(bad, {"yes/b.wav": "testing"})
        r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("czech_dita", r.stderr)
        reserved = good + [dict(path="no/d.wav", split="training", engine="flite", voice="slt", variant="")]
        d = self._manifest(reserved, {"yes/b.wav": "testing"})
        r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("reserved", r.stderr)


if __name__ == "__main__":
    unittest.main()
