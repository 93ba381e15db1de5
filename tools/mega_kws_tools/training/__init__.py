"""Training: train (the command), soup (weight averaging of runs), mine_hard
(hard streaming windows), voice_probe and voice_norm_check (analyses)."""
