"""The Japanese lessons (issue 17; one code source since issue 26): each is built from the
English lesson and its translation ``lessons/ja/NN_topic.md``, runs headless with the
solutions and answers in Japanese; its code is the English lesson's code (the same AST once
strings and comments are set aside, the same cells, the same exercises in the same order);
its prose is Japanese; and it uses the glossary's terms, never the ones the glossary rules out.

Every test is parametrised over the ENGLISH lessons, so a lesson without its translation
fails (it is not skipped).
"""

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from collsim.cli.lesson import CELL, cells, find_lessons
from collsim.course.translation import (
    read_translation,
    translate_code,
    translate_lesson,
    unused_strings,
)
from collsim.course.working_copy import translation_path, working_copy

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
JA = LESSONS / "ja"
FILES = sorted(find_lessons(LESSONS).values())
CHECKS = {"check", "check_array", "check_function", "check_rank"}
DECIMAL_SIZE = re.compile(r"\d\s?[KMGTP]B\b(?!/s)")  # as tests/test_lessons.py
RAW_RATE = re.compile(r"\de[+-]?\d+\s?B/s")


def read(path):
    return path.read_text(encoding="utf-8")


def translation(path):
    """The Japanese translation of an English lesson; a missing one fails the test."""
    source = translation_path(path, "ja")
    assert source.exists(), f"lessons/ja/{source.name} is missing: translate {path.name}"
    return read_translation(source)


def twin(path):
    """The text of the Japanese lesson, built from the English code and its translation."""
    return translate_lesson(read(path), translation(path))


def twin_solutions(path):
    return translate_code(read(LESSONS / "solutions" / path.name), translation(path).strings)


# ---- (a) every Japanese lesson runs with the solutions and answers in Japanese ---------------


def _run(english, out):
    path = working_copy(english, "ja", folder=out / "ja").lesson  # beside its own solutions
    env = {
        k: v for k, v in os.environ.items() if k not in ("COLLSIM_LANG", "LC_ALL", "LC_MESSAGES")
    }
    # an English locale: the feedback must be Japanese because the lesson is under ja/
    env.update(LANG="C.UTF-8", COLLSIM_SOLUTIONS="1", MPLBACKEND="Agg", COLLSIM_LESSON_OUT=str(out))
    done = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=out,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    return done, out


@pytest.fixture(scope="module")
def lesson_runs(request, tmp_path_factory):
    """Start every selected Japanese lesson at once, two at a time (they dominate the time)."""
    wanted = [
        item.callspec.params["path"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_japanese_lesson_runs_in_japanese"
        and translation_path(item.callspec.params["path"], "ja").exists()
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {p: pool.submit(_run, p, tmp_path_factory.mktemp(p.stem)) for p in wanted}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_japanese_lesson_runs_in_japanese(path, lesson_runs):
    translated = twin(path)
    done, out = lesson_runs[path].result()
    assert read(out / "ja" / path.name) == translated, "the run is the built lesson"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Not yet" not in done.stdout and "まだ正解ではありません" not in done.stdout
    assert "Correct!" not in done.stdout, "the feedback of a Japanese lesson is Japanese"
    sites = len(_exercises(translated)["checks"])
    assert done.stdout.count("正解です！") >= sites, "every check says 正解です！"
    assert list(out.glob("*.png")), "a lesson draws at least one picture"
    assert "[図を保存しました: " in done.stdout and "[picture saved" not in done.stdout
    assert not DECIMAL_SIZE.findall(done.stdout), DECIMAL_SIZE.findall(done.stdout)
    assert not RAW_RATE.findall(done.stdout), RAW_RATE.findall(done.stdout)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_japanese_lesson_shape(path):
    translated, number = twin(path), int(path.name[:2])
    parts = cells(translated)
    assert translated.splitlines()[1].startswith(f"# # {number}. ")
    assert "まとめ" in parts[-1][1].splitlines()[0], "the last cell is まとめ (the takeaways)"
    english = re.findall(r"\*\*Exercise (\d+\.\d+)", read(path))
    assert re.findall(r"\*\*演習 (\d+\.\d+)", translated) == english
    text = translated + twin_solutions(path)
    named = {int(n) for n in re.findall(r"レッスン ?(\d+)", text)}
    assert named <= set(find_lessons(LESSONS)), f"names no lesson: {named}"
    for file in re.findall(r"lessons/(?:ja/)?(?:solutions/)?\d\d_[a-z_]+\.py", text):
        source = file.replace("lessons/ja/", "lessons/")  # a Japanese lesson is built from it
        assert (ROOT / source).exists(), f"{file} is gone"


# ---- (b) the same code: one source, the translation only prose and strings ------------------


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_markdown_cell_has_its_translation(path):
    english = [kind for kind, _ in cells(read(path)) if kind == "markdown"]
    prose = translation(path).prose
    assert len(prose) == len(english), f"{len(prose)} sections for {len(english)} cells"
    assert all(section.strip() for section in prose), "an empty prose section"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_translated_string_is_one_the_english_code_has(path):
    # an entry left behind when the English changed would leave English in the Japanese lesson
    texts = [read(path), read(LESSONS / "solutions" / path.name)]
    assert unused_strings(texts, translation(path)) == []


def test_the_japanese_lessons_keep_no_code_of_their_own():
    tracked = subprocess.run(
        ["git", "ls-files", "lessons/ja"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked, "git lists the Japanese translations"
    assert [f for f in tracked if not f.endswith(".md")] == [], "only prose lives in lessons/ja"
    assert len([f for f in tracked if re.search(r"/\d\d_[a-z_]+\.md$", f)]) == len(FILES)


class _StringsAside(ast.NodeTransformer):
    """Every string constant becomes "", an f-string keeps only its ``{expression:spec}``s."""

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            return ast.copy_location(ast.Constant(value=""), node)
        return node

    def visit_JoinedStr(self, node):
        values = [
            ast.FormattedValue(
                value=self.visit(v.value), conversion=v.conversion, format_spec=v.format_spec
            )  # the spec is code: kept
            for v in node.values
            if isinstance(v, ast.FormattedValue)
        ]
        return ast.copy_location(ast.JoinedStr(values=values), node)


def _code(source):
    return ast.dump(_StringsAside().visit(ast.parse(source)))


# the units collsim.teach reads and formats (a string answer "14MiB" is parsed in them);
# any other unit ("micro-batches", "GPUs") is a label the translation may translate
READ_UNITS = {"B", "bytes", "byte", "s", "seconds", "B/s", "fraction", "x", ""}


def _unit(call):
    unit = next((k.value for k in call.keywords if k.arg == "unit"), None)
    if isinstance(unit, ast.Constant) and unit.value not in READ_UNITS:
        return "a label"
    return None if unit is None else ast.unparse(unit)


def _exercises(text):
    """The exercises in source order: each check (function, id, answer slot, unit), the
    answer slots assigned, and the picture names shown."""
    tree = ast.parse(text)
    calls = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    name = lambda n: getattr(n.func, "attr", getattr(n.func, "id", None))  # noqa: E731
    checks = [
        (name(c), ast.unparse(c.args[0]), ast.unparse(c.args[1]), _unit(c))
        for c in calls
        if name(c) in CHECKS and len(c.args) >= 2
    ]
    slots = [
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and t.id.endswith("_answer")
    ]
    shows = [ast.unparse(c.args[1]) for c in calls if name(c) == "show" and len(c.args) == 2]
    return {"checks": checks, "slots": slots, "pictures": shows}


def differences(english, japanese):
    """What makes two lesson texts' code differ ([] when it is the same)."""
    problems = []
    markers = [
        [line for line in text.splitlines() if CELL.match(line)] for text in (english, japanese)
    ]
    if markers[0] != markers[1]:
        problems.append(f"cell markers differ: {len(markers[0])} vs {len(markers[1])}")
    en, ja = cells(english), cells(japanese)
    if [k for k, _ in en] != [k for k, _ in ja]:
        problems.append(f"cell kinds differ: {[k for k, _ in en]} vs {[k for k, _ in ja]}")
    for i, ((kind, a), (_, b)) in enumerate(zip(en, ja)):
        if kind != "code":
            continue
        try:
            same = _code(a) == _code(b)
        except SyntaxError as exc:
            problems.append(f"cell {i + 1}: {exc}")
            continue
        if not same:
            problems.append(f"cell {i + 1} (line {a.splitlines()[0]!r}): the code differs")
    for what, (x, y) in {
        k: (v, _exercises(japanese)[k]) for k, v in _exercises(english).items()
    }.items():
        if x != y:
            problems.append(f"{what} differ: {x} vs {y}")
    return problems


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_japanese_lesson_has_the_english_code(path):
    assert differences(read(path), twin(path)) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_japanese_solutions_have_the_english_code(path):
    english = read(LESSONS / "solutions" / path.name)
    assert _code(english) == _code(twin_solutions(path)), f"solutions/{path.name} differ"


def _mutate(text, kind, change):
    """``text`` with the first token of ``kind`` (in code, not prose) changed by ``change``."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    lines = text.splitlines(keepends=True)
    for tok in tokens:
        if tok.type == kind and (kind != tokenize.NAME or tok.string not in ("from", "import")):
            (row, col), (_, end) = tok.start, tok.end
            line = lines[row - 1]
            lines[row - 1] = line[:col] + change(tok.string) + line[end:]
            return "".join(lines)
    raise AssertionError(f"no {tokenize.tok_name[kind]} token to change")


def _sample():
    """A Japanese lesson to mutate (the first one)."""
    return read(FILES[0]), twin(FILES[0])


@pytest.mark.parametrize(
    "what, mutate",
    [
        ("a number", lambda t: _mutate(t, tokenize.NUMBER, lambda s: s + "1")),
        ("a name", lambda t: _mutate(t, tokenize.NAME, lambda s: s + "_x")),
        ("a keyword argument", lambda t: t.replace('unit="', 'rel=1, unit="', 1)),
        ("a unit teach reads", lambda t: t.replace('unit="B"', 'unit="s"', 1)),
        ("a cell marker", lambda t: t.replace("\n# %%\n", "\n", 1)),
        ("a statement added", lambda t: t.replace("\n# %%\n", "\n# %%\nprint('追加')\n", 1)),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_changing_the_code_of_a_japanese_lesson_fails_the_comparison(what, mutate):
    english, japanese = _sample()
    changed = mutate(japanese)
    assert changed != japanese
    assert differences(english, changed), f"changing {what} went unnoticed"


@pytest.mark.parametrize(
    "what, mutate",
    [
        ("a string", lambda t: _mutate(t, tokenize.STRING, lambda s: '"翻訳した文字列"')),
        ("a comment", lambda t: t.replace("\n# %%\n", "\n# %%\n# 日本語のコメント\n", 1)),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_translating_strings_and_comments_keeps_the_code_the_same(what, mutate):
    english, japanese = _sample()
    changed = mutate(japanese)
    assert changed != japanese and differences(english, changed) == [], what


def test_a_unit_label_may_be_translated_but_not_a_unit_teach_reads():
    lesson = '# %%\nn_answer = None\n\n# %%\nteach.check("1.1", n_answer, 8, unit="{}")\n'
    english = lesson.format("GPUs")
    assert differences(english, lesson.format("台の GPU")) == []
    assert differences(lesson.format("B"), lesson.format("s")) != []


def test_an_f_string_may_change_its_text_but_not_its_expressions_or_specs():
    assert _code('f"rank {r} sent {n:,} B"') == _code('f"ランク {r} は {n:,} B を送信"')
    assert _code('f"{n:,} B"') != _code('f"{n:.3g} B"')
    assert _code('f"{n} B"') != _code('f"{m} B"')


# ---- (c) the prose is Japanese ---------------------------------------------------------------

KANA_KANJI = re.compile(r"[\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
SHARE = 0.5  # more than half of a cell's letters are kana or kanji ...
MIN_LETTERS = 12  # ... once it has this many; a shorter cell needs one kana or kanji
SET_ASIDE = [
    (re.compile(r"```.*?```", re.S), " "),  # code blocks
    (re.compile(r"`[^`]*`"), " "),  # `code spans` (they may wrap a line)
    (re.compile(r"\$\$.*?\$\$", re.S), " "),  # display math
    (re.compile(r"\$[^$\n]*\$"), " "),  # $math$
    (re.compile(r"\]\([^)\s]*\)"), "]"),  # markdown link targets
    (re.compile(r"<?https?://[^\s)>]+>?"), " "),  # URLs
]


def prose_letters(markdown):
    """``(kana and kanji, all letters)`` of a markdown cell, outside code, math and URLs
    (Greek letters count as math)."""
    text = "\n".join(
        line[2:] if line.startswith("# ") else line.lstrip("#") for line in markdown.splitlines()
    )
    for pattern, blank in SET_ASIDE:
        text = pattern.sub(blank, text)
    letters = [
        c for c in text if unicodedata.category(c).startswith("L") and not "\u0370" <= c <= "\u03ff"
    ]
    return sum(bool(KANA_KANJI.match(c)) for c in letters), len(letters)


def is_japanese(markdown):
    japanese, letters = prose_letters(markdown)
    if letters < MIN_LETTERS:
        return letters == 0 or japanese > 0
    return japanese > SHARE * letters


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_markdown_cell_is_japanese(path):
    english = [c for c in cells(twin(path)) if c[0] == "markdown"]
    bad = [
        f"cell {i + 1}: {prose_letters(s)} {s.splitlines()[0]!r}"
        for i, (_, s) in enumerate(english)
        if not is_japanese(s)
    ]
    assert not bad, "markdown cells that are not mostly Japanese:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "markdown, japanese",
    [
        ("# ## Takeaways", False),
        ("# ## まとめ", True),
        ("# $2(K-1)/K \\cdot N \\cdot b$", True),
        ("# The ring sends `2(K-1)/K` of the buffer in every step of the all-reduce.", False),
        ("# リングは各ステップでバッファの `2(K-1)/K` を送ります (all-reduce)。", True),
        ("# See [the NCCL docs](https://docs.nvidia.com/nccl/) にあります", False),
        ("# 詳しくは [NCCL のドキュメント](https://docs.nvidia.com/nccl/) を見てください", True),
    ],
    ids=lambda x: str(x)[:30],
)
def test_the_japanese_prose_rule(markdown, japanese):
    assert is_japanese(markdown) is japanese


# ---- (d) the glossary's terms ----------------------------------------------------------------


def glossary():
    """``[(English alternatives, Japanese alternatives, terms not to use)]`` from the table."""
    rows = []
    for line in read(JA / "GLOSSARY.md").splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if (
            not line.startswith("|")
            or len(cols) != 3
            or cols[0] in ("English", "")
            or set(cols[0]) <= {"-"}
        ):
            continue
        english = [re.sub(r"\s*\([^)]*\)", "", t).strip() for t in cols[0].split(" / ")]
        japanese = [t.strip() for t in cols[1].split(" / ")]
        banned = [t.strip() for t in re.split(r"[/、,]", cols[2]) if t.strip()]
        rows.append((english, japanese, banned))
    return rows


def _spellings(term):
    """A Japanese cell may give either the term or its reading: "all-reduce (オールリデュース)"."""
    inner = re.findall(r"\(([^)]*)\)", term)
    return [re.sub(r"\s+", "", t) for t in [re.sub(r"\s*\([^)]*\)", "", term), *inner] if t]


def _prose(text):
    """The markdown cells of a lesson with code, math, URLs and link targets set aside."""
    prose = "\n".join(s for k, s in cells(text) if k == "markdown")
    for pattern, blank in SET_ASIDE:
        prose = pattern.sub(blank, prose)
    return prose


def test_the_glossary_parses():
    rows = glossary()
    assert len(rows) >= 50
    assert (["gradient accumulation"], ["勾配蓄積"], ["勾配累積"]) in rows
    assert (
        ["activation checkpointing", "recomputation"],
        ["活性値チェックポイント", "再計算"],
        [],
    ) in rows


def glossary_problems(english_text, japanese_text, japanese_solutions=""):
    """Banned terms used anywhere, and glossary terms of the English prose missing from the
    Japanese prose ([] when the glossary is followed)."""
    english = _prose(english_text).lower()
    japanese = re.sub(r"\s+", "", _prose(japanese_text))
    problems = []
    for en_terms, ja_terms, banned in glossary():
        problems += [
            f"uses {b!r} (the glossary says {ja_terms[0]!r})"
            for b in banned
            if b in japanese_text + japanese_solutions
        ]
        # the term or its plural ("ranks", "switches"), not a longer word ("sharding"); any
        # of the row's Japanese terms will do ("shard the states": シャーディングする)
        used = [t for t in en_terms if re.search(rf"\b{re.escape(t.lower())}(?:s|es)?\b", english)]
        spellings = [s for t in ja_terms for s in _spellings(t)]
        if used and not any(s in japanese for s in spellings):
            problems.append(
                f"{used[0]!r} is in the English prose, {' / '.join(ja_terms)!r} "
                "is not in the Japanese"
            )
    return problems


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_glossary_terms_are_the_ones_used(path):
    problems = glossary_problems(read(path), twin(path), twin_solutions(path))
    assert not problems, f"lessons/ja/{path.name}:\n" + "\n".join(problems)


def test_the_glossary_rule_bites():
    english = "# %% [markdown]\n# Gradient accumulation on every rank.\n"
    assert glossary_problems(english, "# %% [markdown]\n# 各ランクで勾配蓄積をします。\n") == []
    banned = glossary_problems(english, "# %% [markdown]\n# 各ランクで勾配累積をします。\n")
    assert any("'勾配累積'" in p for p in banned)  # a term not to use
    missing = glossary_problems(english, "# %% [markdown]\n# 各 GPU で勾配蓄積をします。\n")
    assert missing == ["'rank' is in the English prose, 'ランク' is not in the Japanese"]
    code = "# %% [markdown]\n# `rank` と勾配蓄積。\n"  # a code span is not prose
    assert glossary_problems("# %% [markdown]\n# `rank` and gradient accumulation\n", code) == []


# ---- README.ja.md ----------------------------------------------------------------------------


def test_the_japanese_readme_has_the_quick_start_the_lessons_in_order_and_the_glossary():
    readme = read(ROOT / "README.ja.md")
    english = read(ROOT / "README.md")
    quick = re.search(r"## Quick start.*?```\n(.*?)```", english, re.S).group(1)
    japanese = re.search(r"## クイックスタート.*?```\n(.*?)```", readme, re.S).group(1)
    # the same commands, the tour and the lessons in Japanese
    assert japanese.replace(" --lang ja", "") == quick, "the quick start of README.md"
    items = re.findall(r"^(\d+)\. \[([^\]]+)\]\(lessons/ja/(\d\d_[a-z_]+)\.md\)", readme, re.M)
    assert [(int(n), f) for n, _, f in items] == [(int(p.name[:2]), p.stem) for p in FILES]
    for n, title, name in items:
        header = twin(LESSONS / f"{name}.py").splitlines()[1]
        assert header.startswith(f"# # {n}. {title}"), (header, title)
    assert "(lessons/ja/GLOSSARY.md)" in readme
    for command in ("collsim tour --lang ja", "collsim lesson list --lang ja"):
        assert command in readme
    # every other command it shows is one README.md or docs/commands.md shows, flag for flag
    commands = [c.strip() for c in re.findall(r"^(collsim [^#\n]*)", readme, re.M)]
    english += read(ROOT / "docs" / "commands.md")
    shown = [c.strip() for c in re.findall(r"^(collsim [^#\n]*)", english, re.M)]
    assert len(commands) >= 15
    assert [c for c in commands if "--lang" not in c and c not in shown] == []
