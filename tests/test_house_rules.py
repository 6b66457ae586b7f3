"""The house rules that are about the source's shape, as tests (DESIGN.md: "about 300 lines is a
good sign, 400 the limit"; CONTRIBUTING.md, "House rules").

Every module under ``collsim/`` is at most :data:`MAX_LINES` lines long, so that a student can
read it in one sitting. The few modules known to be over it are listed, each with the reason
and the change that brings it under; a listed module that has come under the limit fails too,
so the list can only shrink.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "collsim"
MAX_LINES = 400

# path (from the repository root) -> why it is still over the limit
KNOWN_LONG_MODULES = {}


def line_count(path: Path) -> int:
    """Lines as an editor numbers them (``wc -l`` for a file that ends in a newline)."""
    return len(path.read_text(encoding="utf-8").splitlines())


def module_lengths(package: Path) -> dict[str, int]:
    """Every ``.py`` file under ``package`` (path from the repository root) -> its lines."""
    return {
        path.relative_to(package.parent).as_posix(): line_count(path)
        for path in sorted(package.rglob("*.py"))
    }


def too_long(lengths: dict[str, int], known: dict[str, str]) -> list[str]:
    """The modules over :data:`MAX_LINES` that are not listed in ``known``, as report lines."""
    return [
        f"{path}: {lines} lines (the limit is {MAX_LINES}; split it along a seam: one concept "
        f"a module, the public names re-exported where users import them)"
        for path, lines in lengths.items()
        if lines > MAX_LINES and path not in known
    ]


def stale_exceptions(lengths: dict[str, int], known: dict[str, str]) -> list[str]:
    """The listed modules that are gone or no longer over the limit, as report lines."""
    return [
        f"{path}: {'gone' if path not in lengths else f'{lengths[path]} lines'}, listed in "
        f"KNOWN_LONG_MODULES ({reason!r}): remove it from the list"
        for path, reason in known.items()
        if lengths.get(path, 0) <= MAX_LINES
    ]


def test_the_checker_counts_lines_as_wc_does(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "pkg" / "b.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    lengths = module_lengths(tmp_path / "pkg")
    assert lengths == {"pkg/a.py": MAX_LINES + 1, "pkg/b.py": MAX_LINES}
    assert [line.split(":")[0] for line in too_long(lengths, {})] == ["pkg/a.py"]
    assert too_long(lengths, {"pkg/a.py": "being split"}) == []
    assert stale_exceptions(lengths, {"pkg/b.py": "was long"})[0].startswith("pkg/b.py: 400")
    assert "gone" in stale_exceptions(lengths, {"pkg/c.py": "moved"})[0]


def test_every_module_is_at_most_400_lines():
    wrong = too_long(module_lengths(PACKAGE), KNOWN_LONG_MODULES)
    assert not wrong, "modules over the limit:\n" + "\n".join(wrong)


def test_the_list_of_long_modules_only_shrinks():
    """A listed module that was split (or removed) leaves the list in the same change."""
    stale = stale_exceptions(module_lengths(PACKAGE), KNOWN_LONG_MODULES)
    assert not stale, "\n".join(stale)
