# SPDX-License-Identifier: Apache-2.0
"""Keyword text: validation, pronunciation and near misses.

A keyword is one to four English words (letters, apostrophes, hyphens). Its
pronunciation comes from the CMU pronouncing dictionary that Debian's
pocketsphinx-en-us installs; near misses are dictionary words (and, for a
phrase, the phrase with one word swapped) whose phonemes are one or two edits
away from the keyword's: words that share most of its sounds, which a model
trained on renders alone would otherwise fire on.
"""

import os
import re

import numpy as np

CMUDICT = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"
# Debian's wamerican: ordinary words in lower case, names capitalized. Near
# misses are drawn from its lower-case words when it is there, so that they are
# words people say rather than the dictionary's many surnames.
WORDLIST = "/usr/share/dict/american-english"
MAX_LABEL_CHARS = 32
MAX_WORDS = 4
_WORD = re.compile(r"^[a-z][a-z'-]*$")
# Phrases that stand for what the model reports when nothing is said.
_RESERVED = {"_silence_", "_unknown_"}


class KeywordError(ValueError):
    """A keyword the command cannot train (the message is one line for the user)."""


def normalize(text: str) -> str:
    return " ".join(text.lower().split())


def check_keywords(texts):
    """The keywords as labels (lower case, single spaces), or KeywordError naming
    the first problem: empty, too long, not English letters, a duplicate."""
    if not texts:
        raise KeywordError("no --keyword given")
    labels, seen = [], {}
    for i, raw in enumerate(texts):
        label = normalize(raw)
        where = f"keyword {i + 1} ({raw!r})"
        if not label:
            raise KeywordError(f"{where} is empty")
        if label in _RESERVED or label.startswith("_"):
            raise KeywordError(f"{where} may not start with '_' (labels starting with '_' never fire)")
        if len(label) > MAX_LABEL_CHARS:
            raise KeywordError(f"{where} has {len(label)} characters; at most {MAX_LABEL_CHARS}")
        words = label.split()
        if len(words) > MAX_WORDS:
            raise KeywordError(f"{where} has {len(words)} words; at most {MAX_WORDS} (the model hears 1 s at a time)")
        bad = [w for w in words if not _WORD.match(w)]
        if bad:
            raise KeywordError(f"{where}: {bad[0]!r} is not an English word (letters, apostrophes and hyphens only)")
        if label in seen:
            raise KeywordError(f"{where} repeats keyword {seen[label] + 1}")
        seen[label] = i
        labels.append(label)
    return labels


def load_dictionary(path: str = CMUDICT):
    """{word: [phoneme tuple, ...]} of the dictionary ({} if it is absent)."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2:
                continue
            word = re.sub(r"\(\d+\)$", "", parts[0])
            out.setdefault(word, []).append(tuple(parts[1:]))
    return out


def common_words(path: str = WORDLIST):
    """The word list's lower-case words (None without the list)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return {w.strip() for w in f if w.strip() and w.strip().islower() and "'" not in w}


def pronunciations(label: str, lexicon):
    """Every phoneme sequence of the phrase (the words' variants combined, at
    most 8), or [] when a word is not in the dictionary."""
    seqs = [()]
    for w in label.split():
        if w not in lexicon:
            return []
        seqs = [s + p for s in seqs for p in lexicon[w]][:8]
    return seqs


def edit_distance(a, b, limit: int) -> int:
    """Levenshtein distance of two sequences, or limit + 1 once it must exceed limit."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        if min(cur) > limit:
            return limit + 1
        prev = cur
    return prev[-1]


def _max_edits(seq) -> int:
    return 1 if len(seq) <= 4 else 2


def homophones(label: str, lexicon):
    """Dictionary words said exactly as the keyword (a single-word keyword's
    "write" for "right"): never negatives, and speech containing them is not
    keyword-free."""
    prons = set(pronunciations(label, lexicon))
    return sorted(w for w, ps in lexicon.items() if w != label and prons & set(ps))


def near_words(label: str, lexicon, rng: np.random.Generator, limit: int = 60, common=None):
    """Up to `limit` dictionary words one or two phoneme edits from a
    pronunciation of `label` (never one said exactly like it), closest first,
    the common words (in `common`) before the others, at random among equals."""
    prons = pronunciations(label, lexicon)
    if not prons:
        return []
    found = {}
    for word, ps in lexicon.items():
        if word == label or not word.isalpha():
            continue
        d = min(edit_distance(p, q, _max_edits(p)) for p in prons for q in ps)
        if d == 0:
            found.pop(word, None)
            continue
        if d <= _max_edits(prons[0]) and word not in found:
            found[word] = d
    words = sorted(found)
    order = rng.permutation(len(words))
    rare = (lambda w: 0) if common is None else (lambda w: int(w not in common))  # noqa: E731
    ranked = sorted((rare(words[i]), found[words[i]], k) for k, i in enumerate(order))
    return [words[order[k]] for _, _, k in ranked[:limit]]


def letter_variants(label: str, rng: np.random.Generator, limit: int = 20):
    """Spellings one letter away from the keyword's (for words the dictionary
    lacks): read aloud they are sound-alike nonsense words."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = set()
    for _ in range(limit * 20):
        if len(out) >= limit:
            break
        i = int(rng.integers(len(label)))
        if not label[i].isalpha():
            continue
        s = label[:i] + letters[int(rng.integers(26))] + label[i + 1:]
        if s != label:
            out.add(s)
    return sorted(out)


def near_misses(label: str, lexicon, rng: np.random.Generator, limit: int = 60, common=None):
    """Texts that sound close to the keyword but are not it: for a single word,
    near dictionary words; for a phrase, each of its words alone, the phrase
    less a word, and the phrase with one word swapped for a near word."""
    words = label.split()
    if len(words) == 1:
        near = near_words(label, lexicon, rng, limit, common)
        return near or letter_variants(label, rng, min(limit, 20))
    out = set(words) | {" ".join(words[:i] + words[i + 1:]) for i in range(len(words))}
    per_word = max(2, limit // len(words))
    for i, w in enumerate(words):
        for alt in near_words(w, lexicon, rng, per_word, common) or letter_variants(w, rng, 4):
            out.add(" ".join(words[:i] + [alt] + words[i + 1:]))
    out.discard(label)
    return sorted(out)
