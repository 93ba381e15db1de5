# SPDX-License-Identifier: Apache-2.0
"""The project's license is stated where users and package tools read it:
LICENSE is the Apache License 2.0 text, NOTICE credits the data the model is
trained on, both Python packages' metadata name Apache-2.0, and the Debian
packages' copyright file (cmake/debian/copyright) is machine-readable and
names it too. (scripts/test_packages.sh runs lintian on the packages.)"""

import os
import re
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEBIAN_APACHE = "/usr/share/common-licenses/Apache-2.0"


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def test_license_file_is_the_apache_license():
    text = read("LICENSE")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    if os.path.exists(DEBIAN_APACHE):
        with open(DEBIAN_APACHE, encoding="utf-8") as f:
            assert text == f.read(), "LICENSE differs from Debian's copy of the Apache License 2.0"


def test_notice_credits_the_data_and_the_teacher():
    text = " ".join(read("NOTICE").split())
    assert "Copyright 2026 the mega-kws authors" in text
    for credit in ("Speech Commands", "speechocean762", "dataset-voice-cathy", "speech_embedding",
                   "openWakeWord", "facebookresearch/mega"):
        assert credit in text, credit
    assert text.count("CC BY 4.0") >= 2 and "CC0" in text


@pytest.mark.parametrize("pyproject", ["python/pyproject.toml", "tools/pyproject.toml"])
def test_python_package_metadata_names_the_license(pyproject):
    project = tomllib.loads(read(pyproject))["project"]
    # the table form: Debian 12's setuptools (66) does not read a bare SPDX string
    assert project.get("license") == {"text": "Apache-2.0"}, project.get("license")
    assert "License :: OSI Approved :: Apache Software License" in project.get("classifiers", [])


def test_debian_copyright_is_machine_readable():
    text = read("cmake/debian/copyright")
    assert text.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
    paragraphs = text.strip().split("\n\n")
    files = [p for p in paragraphs if p.startswith("Files: *\n")]
    assert len(files) == 1 and re.search(r"^License: Apache-2\.0$", files[0], re.M), files
    # the stand-alone license paragraph that the Files paragraph's short name refers to
    assert any(p.startswith("License: Apache-2.0\n") and DEBIAN_APACHE in p for p in paragraphs)
