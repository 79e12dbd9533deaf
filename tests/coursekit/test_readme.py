"""The README stands alone in a clone: every path it names is in the repository, and what it says of the Pythons and
the PyTorch switch is what the Makefile does."""
import os
import re

from coursekit import ROOT

README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()


def test_the_readme_names_no_path_outside_the_repository():
    assert "../" not in README and "shared/notes" not in README
    for target in re.findall(r"\]\(([^)]+)\)", README):
        if target.startswith(("http://", "https://")):
            continue
        path = target.split("#")[0]
        assert os.path.exists(os.path.join(ROOT, path)), target


def test_the_readme_cites_no_section_of_the_notes():
    """The notes are described, not cited: no "000 §3" or "001 step 5" a reader of the repository cannot open."""
    assert not re.search(r"(?<![\d,.])00\d\b", README), re.findall(r".{30}(?<![\d,.])00\d\b.{30}", README)
    assert "§" not in README


def test_the_readme_says_what_the_makefile_does_with_pythons_and_pytorch():
    make = open(os.path.join(ROOT, "Makefile")).read()
    pythons = re.search(r"^PYTHONS := (.*)$", make, re.M).group(1).split()
    assert f"Python {', '.join(pythons[:-1])} or {pythons[-1]}" in README
    index = re.search(r"^TORCH_CPU_INDEX := (.*)$", make, re.M).group(1)
    assert index in README and "TORCH=cpu" in README and "TORCH=cuda" in README
    assert re.search(r"^TORCH \?= cpu$", make, re.M) and "`TORCH=cpu` (the default" in README
