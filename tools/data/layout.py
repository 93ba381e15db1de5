"""The Speech Commands folder layout, shared by the data tools, the trainer and
the evaluator (plain Python: no numpy or torch here).

A dataset is one folder per word (`yes/`, `bed/`, ...), plus `_silence_/` or
`_background_noise_/`, with validation_list.txt and testing_list.txt naming
the clips of those splits.
"""

KEYWORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
SILENCE = "_silence_"
UNKNOWN = "_unknown_"
NOISE = "_background_noise_"


def folder_label(folder, labels):
    """The label a model with these labels learns for the clips of one folder:
    the folder's own name when it is a label (a keyword, `_silence_`),
    `_unknown_` for any other word when the model has that class, and None for
    a folder it does not use (`_background_noise_`, other `_..._` folders, or
    other words for a keywords-only model)."""
    if folder in labels:
        return folder
    if folder.startswith("_") or UNKNOWN not in labels:
        return None
    return UNKNOWN
