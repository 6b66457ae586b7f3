"""The plain (reference) path explains itself in terms a student reads: what a line does
and why, not CPU cache lines, inlining or hot paths.  Speed tricks that need such words
live in ``collsim/fast/``."""

import io
import pathlib
import re
import tokenize

import collsim

PACKAGE = pathlib.Path(collsim.__file__).parent
SPEED_WORDS = re.compile(r"cache line|inlin|\bcold\b|\bwarm\b(?!-)|hot path", re.I)


def _comments_and_docstrings(path):
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and '"""' in tok.string):
            yield tok.start[0], tok.string


def test_no_comment_outside_the_fast_package_speaks_of_caches_or_inlining():
    found = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "fast" not in path.relative_to(PACKAGE).parts
        for line, text in _comments_and_docstrings(path)
        if SPEED_WORDS.search(text)
    ]
    assert found == []
