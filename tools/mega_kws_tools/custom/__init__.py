# SPDX-License-Identifier: Apache-2.0
"""Your own keyword, from text: `python3 -m mega_kws_tools.custom --keyword WORD --out my.mega`
(cli.py says what each stage does)."""
