# SPDX-License-Identifier: Apache-2.0
"""The text-to-speech voice pool of the synthetic keyword data, and its voice-disjoint splits.

A *voice* is one engine + voice name (espeak-ng `de`, festival `czech_dita`, ...),
with all the variants and pitch/rate settings it is rendered with. Voices built
from one recorded speaker form one *group* (flite kal/kal16 and festival
kal_diphone; the Hindi, Marathi and Telugu NSK voices), and each group belongs
to exactly one split (SPLIT_OF_GROUP): training, validation or testing. Model
selection and tuning use validation; testing is only for the final figures.

Reserved voices (flite awb, rms, slt; festvox-kdlpc16k/8k; festvox-us-slt-hts;
anything built from the CMU ARCTIC awb, rms or slt speakers) judge the model
from outside the project: `check_allowed` refuses them by name, and every
synthesis call goes through it.

Non-English voices read the keywords through a phonetic respelling in their own
orthography (RESPELL), so that their letter-to-sound rules produce something
close to the English word with their accent; other words are read as written
(Latin-script voices) or come from a small native word list (NATIVE_UNKNOWN).
docs/voices.md is the spot-check log: what each voice says for each keyword.
"""

import re

from mega_kws_tools.data.layout import KEYWORDS  # noqa: F401 (re-exported: voices.KEYWORDS)
SPLITS = ["training", "validation", "testing"]

_RESERVED_TOKENS = {"awb", "rms", "slt", "ked"}


def is_reserved(name: str) -> bool:
    """True for a voice (or package) name of a reserved voice: flite awb/rms/slt,
    festvox-kdlpc* (voice ked_diphone), festvox-us-slt-hts, any CMU ARCTIC
    awb/rms/slt build."""
    low = name.lower()
    tokens = [t for t in re.split(r"[^a-z0-9]+", low) if t]
    return (any(t in _RESERVED_TOKENS for t in tokens) or any(t.startswith("kdl") for t in tokens)
            or "arctic" in low)


def check_allowed(engine: str, voice: str, variant: str = "") -> None:
    for name in (voice, variant):
        if name and is_reserved(name):
            raise ValueError(f"voice {engine}:{name} is reserved for evaluation outside the project "
                             "and is never used for training, validation or tuning")


# Keyword respellings per orthography: read by that language's rules, they come
# out close to the English words.
RESPELL = {
    "english": {},
    "latin_j": dict(yes="jes", no="nou", up="ap", down="daun", left="left", right="rajt", on="on", off="of",
                    stop="stop", go="gou"),
    "latin_y": dict(yes="yes", no="nou", up="ap", down="daun", left="left", right="rait", on="on", off="of",
                    stop="stop", go="gou"),
    "germanic": dict(yes="jes", no="nou", up="ap", down="daun", left="left", right="rait", on="on", off="off",
                     stop="stop", go="gou"),
    "romance": dict(yes="ies", no="nou", up="ap", down="daun", left="left", right="rait", on="on", off="of",
                    stop="stop", go="gou"),
    "french": dict(yes="yèsse", no="nô", up="eup", down="daoune", left="lèfte", right="raïte", on="onne",
                   off="offe", stop="stoppe", go="gô"),
    "cyrillic": dict(yes="йес", no="ноу", up="ап", down="даун", left="лефт", right="райт", on="он", off="офф",
                     stop="стоп", go="гоу"),
    "greek": dict(yes="γιες", no="νόου", up="απ", down="ντάουν", left="λεφτ", right="ράιτ", on="ον", off="οφ",
                  stop="στοπ", go="γκόου"),
    "devanagari": dict(yes="येस", no="नो", up="अप", down="डाउन", left="लेफ़्ट", right="राइट", on="ऑन", off="ऑफ़",
                       stop="स्टॉप", go="गो"),
    "telugu": dict(yes="యెస్", no="నో", up="అప్", down="డౌన్", left="లెఫ్ట్", right="రైట్", on="ఆన్", off="ఆఫ్",
                   stop="స్టాప్", go="గో"),
}

# Per-voice corrections where a language's rules read the orthography's respelling
# differently (checked with tools/mega_kws_tools/data/voice_check.py; see docs/voices.md).
OVERRIDES = {
    "espeak-ng:de": dict(no="noo", go="goo", up="app"),
    "espeak-ng:nl": dict(no="noo", go="goo"),
    "espeak-ng:af": dict(no="noo", go="goo"),
    "espeak-ng:sv": dict(no="nå", go="gå", on="ånn", stop="stopp", up="app"),
    "espeak-ng:nb": dict(no="nå", go="gå", on="ånn", stop="stopp", up="app"),
    "espeak-ng:da": dict(no="nå", go="gå", stop="stopp", up="app"),
    "espeak-ng:is": dict(no="nó", go="gó", down="dán", right="ræt", stop="stopp", up="app"),
    "espeak-ng:tr": dict(no="nó", go="gó", up="app"),
    "espeak-ng:bg": dict(up="ъп"),
    "espeak-ng:uk": dict(go="ґоу"),
    "festival:msu_ru_nsh_clunits": dict(no="но", go="го"),
    # the NSK diphone voices add the inherent vowel unless a virama ends the word; no nukta
    "festival:hindi_NSK_diphone": dict(yes="येस्", up="अप्", down="डाउन्", left="लेफ्ट्", right="राइट्", on="ऑन्",
                                       off="ऑफ्", stop="स्टॉप्"),
    # the second pool (MORE_VOICES): Welsh reads f as v, "ou" as [OY], j as [dZ]; Macedonian
    # spells j as "ј" and expands "райт" as an abbreviation
    "espeak-ng:cy": dict(yes="iès", no="no", go="go", down="dawn", left="lefft", off="off"),
    "espeak-ng:mk": dict(yes="јес", right="рајт"),
    "festival:marathi_NSK_diphone": dict(yes="येस्", up="अप्", down="डाउन्", left="लेफ्ट्", right="राइट्", on="ऑन्",
                                         off="ऑफ्", stop="स्टॉप्"),
}

# Accented pronunciations of the keywords for the English espeak-ng voices
# (make_sc10.py --accent): espeak-ng phoneme input ([[...]], its English phoneme
# names), one vowel or consonant changed the way English accents change it: the
# GOAT vowel as [o:], [VU] (close to southern British [@U]) or [0U], PRICE as
# [OI] or [0I], MOUTH as [a:U] or [EU], LOT as [A:] or [O:], STRUT as [U] or
# [@], DRESS raised. Each must stay the keyword, never an _unknown_ word ([ap]
# is "app"): every English voice reads each as given, and none as it reads a
# word of make_sc10.UNKNOWN_WORDS or CONFUSABLE (tests/tools/test_voices.py).
ACCENT_PHONEMES = {
    "yes": ["j'Es", "j'es", "j'Is"],
    "no": ["n'oU", "n'o:", "n'VU", "n'0U"],
    "up": ["'Vp", "'Up", "'@p"],
    "down": ["d'aUn", "d'a:Un", "d'EUn"],
    "left": ["l'Eft", "l'eft"],
    "right": ["r'aIt", "r'OIt", "r'0It"],
    "on": ["'0n", "'A:n", "'O:n"],
    "off": ["'0f", "'O:f", "'A:f"],
    "stop": ["st'0p", "st'A:p", "st'O:p"],
    "go": ["g'oU", "g'o:", "g'VU", "g'0U"],
}

# Other words for voices that cannot read Latin script (none is close to a keyword).
NATIVE_UNKNOWN = {
    "cyrillic": "привет дом вода один два три четыре пять время город работа книга окно сегодня хорошо "
                "спасибо музыка погода машина".split(),
    "greek": "γεια σπίτι νερό ένα δύο τρία τέσσερα χρόνος δουλειά βιβλίο σήμερα καλά μουσική".split(),
    "devanagari": "नमस्ते पानी घर एक तीन चार पाँच समय काम किताब आज अच्छा धन्यवाद संगीत मौसम".split(),
    "telugu": "నమస్కారం నీళ్ళు ఇల్లు ఒకటి రెండు మూడు నాలుగు సమయం పని పుస్తకం ఈరోజు".split(),
}
LATIN = {"english", "latin_j", "latin_y", "germanic", "romance", "french"}


class Voice:
    __slots__ = ("engine", "name", "group", "script", "family", "gender")

    def __init__(self, engine, name, group, script, family, gender="m"):
        check_allowed(engine, name)
        self.engine, self.name, self.group, self.script, self.family, self.gender = \
            engine, name, group, script, family, gender

    @property
    def id(self) -> str:
        return f"{self.engine}:{self.name}"

    def text_for(self, word: str) -> str:
        """What this voice is given to read for `word` (a keyword's respelling, else the word)."""
        return OVERRIDES.get(self.id, {}).get(word) or RESPELL[self.script].get(word, word)

    def reads_as_keyword(self, word: str) -> bool:
        """True when this voice, given `word` (not a keyword) to read, gets the very text of
        its respelling of a keyword ("of" for a voice that reads off as "of", "app" where
        up is "app"), or that text with a consonant doubled ("app" where up is "ap").
        Such a word is that keyword in this voice, never an _unknown_ word: a doubled
        consonant is read the same or only longer by the voices that respell
        (espeak-ng -x: 'app = 'ap in lt, ro, pt, nl; ap: against ap in fi, it, et), and
        English does not tell consonant length apart."""
        if word in KEYWORDS:
            return False
        text = self.text_for(word).lower()
        keyword_texts = {self.text_for(k).lower() for k in KEYWORDS}
        return text in keyword_texts or DOUBLED_CONSONANT.sub(r"\1", text) in keyword_texts

    def __repr__(self):
        return f"Voice({self.id}, group {self.group})"


DOUBLED_CONSONANT = re.compile(r"([bcdfghjklmnpqrstvwxz])\1+")


def _espeak(name, script, family="espeak-accent"):
    return Voice("espeak-ng", name, f"espeak-ng:{name}", script, family)


ESPEAK_ENGLISH = ["en-gb", "en-us", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp", "en-gb-x-gbcwmd",
                  "en-029", "en-us-nyc"]
ESPEAK_ACCENTS = {
    "latin_j": ["cs", "sk", "pl", "hr", "sl", "lt", "lv", "et", "fi", "hu", "ro", "eo"],
    "latin_y": ["tr", "id", "ms", "sw"],
    "germanic": ["de", "nl", "af", "lb", "da", "sv", "nb", "is"],
    "romance": ["it", "es", "es-419", "pt", "pt-br", "ca"],
    "french": ["fr-fr", "fr-be"],
    "cyrillic": ["ru", "uk", "bg"],
    "greek": ["el"],
    "devanagari": ["hi", "mr"],
}

VOICES = (
    [_espeak(v, "english", "espeak-english") for v in ESPEAK_ENGLISH]
    + [_espeak(v, script) for script, names in ESPEAK_ACCENTS.items() for v in names]
    + [Voice("flite", "kal", "kal", "english", "natural"),
       Voice("flite", "kal16", "kal", "english", "natural"),
       Voice("festival", "kal_diphone", "kal", "english", "natural"),
       Voice("festival", "czech_dita", "festival:czech_dita", "latin_j", "natural", "f"),
       Voice("festival", "czech_krb", "festival:czech_krb", "latin_j", "natural", "child"),
       Voice("festival", "czech_machac", "festival:czech_machac", "latin_j", "natural"),
       Voice("festival", "czech_ph", "festival:czech_ph", "latin_j", "natural"),
       Voice("festival", "upc_ca_ona_hts", "festival:upc_ca_ona_hts", "romance", "natural", "f"),
       Voice("festival", "lp_diphone", "festival:lp_diphone", "romance", "natural", "f"),
       Voice("festival", "pc_diphone", "festival:pc_diphone", "romance", "natural"),
       Voice("festival", "suo_fi_lj_diphone", "festival:suo_fi_lj_diphone", "latin_j", "natural", "f"),
       Voice("festival", "hy_fi_mv_diphone", "festival:hy_fi_mv_diphone", "latin_j", "natural"),
       Voice("festival", "msu_ru_nsh_clunits", "festival:msu_ru_nsh_clunits", "cyrillic", "natural"),
       Voice("festival", "hindi_NSK_diphone", "NSK", "devanagari", "natural"),
       Voice("festival", "marathi_NSK_diphone", "NSK", "devanagari", "natural"),
       Voice("festival", "telugu_NSK_diphone", "NSK", "telugu", "natural")]
)

# A second pool, added after the first data set (sc10v) was made, so that the commands
# that made it still make the same clips: more espeak-ng languages reading the
# respellings, each checked with tools/mega_kws_tools/data/voice_check.py (docs/voices.md). All of
# them train (none is held out); make_sc10.py --pool more renders these alone.
# The languages left out, and why, are listed in docs/voices.md.
MORE_ESPEAK_ACCENTS = {
    "latin_j": ["bs", "sq", "ltg"],
    "latin_y": ["tn", "om", "qu"],
    "romance": ["eu", "ia", "io", "la", "pap", "cy"],
    "french": ["fr-ch"],
    "cyrillic": ["mk", "kk", "cv"],
}
MORE_VOICES = [_espeak(v, script) for script, names in MORE_ESPEAK_ACCENTS.items() for v in names]
ALL_VOICES = VOICES + MORE_VOICES
POOLS = {"base": VOICES, "more": MORE_VOICES}

# Groups held out of training; every other group trains. Each held-out split has
# native English, accented and natural-recording voices, male and female.
HELD_OUT = {
    "validation": ["espeak-ng:en-gb-x-rp", "espeak-ng:nl", "espeak-ng:pl", "espeak-ng:es-419", "espeak-ng:sv",
                   "espeak-ng:uk", "festival:hy_fi_mv_diphone", "festival:lp_diphone"],
    "testing": ["espeak-ng:en-029", "espeak-ng:de", "espeak-ng:it", "espeak-ng:pt-br", "espeak-ng:hu",
                "espeak-ng:bg", "festival:czech_dita", "festival:czech_ph"],
}


def split_of(voice: Voice) -> str:
    for split, groups in HELD_OUT.items():
        if voice.group in groups:
            return split
    return "training"


def voices_of(split: str, voices=None):
    return [v for v in (ALL_VOICES if voices is None else voices) if split_of(v) == split]


# How often each family is drawn (within a split; renormalized over the families it has).
FAMILY_WEIGHTS = {"espeak-english": 0.35, "espeak-accent": 0.25, "natural": 0.40}


def unknown_words_for(voice: Voice, english_words):
    return list(english_words) if voice.script in LATIN else NATIVE_UNKNOWN[voice.script]


def _check_tables():
    groups = [g for gs in HELD_OUT.values() for g in gs]
    assert len(groups) == len(set(groups)), "a group in two held-out splits"
    known = {v.group for v in VOICES}
    assert not {v.group for v in MORE_VOICES} & set(groups), "a voice of the second pool is held out"
    assert len({v.id for v in ALL_VOICES}) == len(ALL_VOICES), "a voice in both pools"
    assert set(groups) <= known, f"unknown held-out groups {set(groups) - known}"
    assert set(ACCENT_PHONEMES) == set(KEYWORDS)
    for script, table in RESPELL.items():
        assert not table or set(table) == set(KEYWORDS), script
    ids = {v.id for v in ALL_VOICES}
    for vid, table in OVERRIDES.items():
        assert vid in ids and set(table) <= set(KEYWORDS), vid


_check_tables()
