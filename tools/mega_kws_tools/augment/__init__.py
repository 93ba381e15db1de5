# SPDX-License-Identifier: Apache-2.0
"""Training-time augmentation: noise (noise and babble), speaker (speed,
formants and tilt, pitch), splice (half-keyword near misses), features (the
front end's warped filters and masks), batch (the examples they make up), and make_splices (half-keyword clips as files)."""
