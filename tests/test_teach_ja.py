"""Japanese feedback, the language rule and `--lang` (issue 17, items 2 and 3).

The message catalogs of collsim.teach and of the tour have the same keys and the same
placeholders in both languages; the language is COLLSIM_LANG, else a lesson under a `ja`
folder, else the locale; a lesson run in Japanese answers in Japanese without any code of
its own; `collsim lesson --lang ja` and `collsim tour --lang ja` speak Japanese with the same
runs and numbers, and refuse a language they do not have by name.
"""

import os
import re
import runpy
import string

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim import teach
from collsim.cli import main
from collsim.errors import ConfigError
from collsim.teach.language import current_language, parse_language
from collsim.teach.messages import EN, JA
from collsim.teach.tour_text import TOUR

# kana, kanji and the Japanese punctuation (。、「」): what a Japanese sentence is written in
JAPANESE = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
LANG_VARIABLES = ("COLLSIM_LANG", "LC_ALL", "LC_MESSAGES", "LANG")


@pytest.fixture(autouse=True)
def english_locale(monkeypatch):
    """Each test starts from a plain English environment and sets what it tests."""
    for name in LANG_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)


def placeholders(template):
    """The ``{name:spec}`` fields of a format string, in order."""
    return [(name, spec) for _, name, spec, _ in string.Formatter().parse(template) if name]


def reply(capsys):
    return " ".join(capsys.readouterr().out.split())


# ---- the catalogs ------------------------------------------------------------------------------


def test_the_teach_catalogs_have_the_same_keys():
    assert sorted(EN) == sorted(JA)


@pytest.mark.parametrize("key", sorted(EN))
def test_a_teach_message_has_the_same_placeholders_and_is_japanese(key):
    assert sorted(placeholders(EN[key])) == sorted(placeholders(JA[key])), key
    assert JAPANESE.search(JA[key]), f"{key}: {JA[key]!r} has no kana or kanji"


@pytest.mark.parametrize("key", sorted(TOUR))
def test_a_tour_sentence_has_the_same_placeholders_and_specs_in_both(key):
    english, japanese = TOUR[key]
    assert sorted(placeholders(english)) == sorted(placeholders(japanese)), key
    assert JAPANESE.search(japanese), f"{key}: {japanese!r} has no kana or kanji"


def test_the_placeholder_rule_bites():
    assert placeholders("{a} of {b:>10}") != placeholders("{a} の {b:>9}")


# ---- the language rule --------------------------------------------------------------------------

RULE = [
    ({}, None, "en"),
    ({"COLLSIM_LANG": "ja"}, None, "ja"),
    ({"COLLSIM_LANG": "JA "}, None, "ja"),
    ({"COLLSIM_LANG": "en"}, "lessons/ja/04_ring_allreduce.py", "en"),
    ({"COLLSIM_LANG": "en", "LANG": "ja_JP.UTF-8"}, None, "en"),
    ({"COLLSIM_LANG": "fr"}, None, "en"),  # ignored, not a crash
    ({}, "lessons/ja/04_ring_allreduce.py", "ja"),
    ({}, "lessons/04_ring_allreduce.py", "en"),
    ({}, "/home/ja/lessons/04_ring_allreduce.py", "en"),  # only the lesson's own folder
    ({"LANG": "ja_JP.UTF-8"}, None, "ja"),
    ({"LANG": "ja"}, "lessons/04_ring_allreduce.py", "ja"),
    ({"LC_ALL": "ja_JP.UTF-8", "LANG": "C"}, None, "ja"),
    ({"LC_ALL": "C.UTF-8", "LANG": "ja_JP.UTF-8"}, None, "en"),  # LC_ALL first, as POSIX
    ({"LC_MESSAGES": "ja_JP.UTF-8", "LANG": "en_US"}, None, "ja"),
    ({"LANG": "jv_ID"}, None, "en"),
]


@pytest.mark.parametrize("environ, path, expected", RULE, ids=[str(r[:2]) for r in RULE])
def test_current_language(environ, path, expected):
    assert current_language(path, environ=environ) == expected


@pytest.mark.parametrize(
    "value, code",
    [
        ("ja", "ja"),
        ("JA", "ja"),
        (" en ", "en"),
        ("japanese", "ja"),
        ("ja_JP.UTF-8", "ja"),
        ("English", "en"),
    ],
)
def test_parse_language_reads_the_usual_spellings(value, code):
    assert parse_language(value) == code


@pytest.mark.parametrize("value", ["fr", "jp", "", "jaa", "日本語", "1"])
def test_parse_language_refuses_by_name(value):
    with pytest.raises(ConfigError) as info:
        parse_language(value)
    assert repr(value) in str(info.value) and "'ja'" in str(info.value)


# ---- teach speaks the lesson's language ----------------------------------------------------------


def test_japanese_feedback_for_every_kind_of_check(monkeypatch, capsys):
    import numpy as np

    monkeypatch.setenv("COLLSIM_LANG", "ja")
    assert teach.check("x", 1024, expected=1024, unit="B") is True
    assert reply(capsys) == "正解です！ x: 1,024 B (1 KiB)"
    teach.check("x", 2 * 3 * 2**20, expected=3 * 2**20, unit="B")
    out = reply(capsys)
    assert out.startswith("まだ正解ではありません。x: あなたの答えは 6,291,456 B (6 MiB)")
    assert "答えの 2 倍です。何かを二重に数えていませんか" in out and "Not yet" not in out
    teach.check("k", 5 * 7.0, expected=7.0, unit="x", ranks=5)
    assert "答えの K = 5 倍です" in reply(capsys)
    teach.check("c", 5, expected=8, unit="GPUs")
    assert "3 少なすぎます" in reply(capsys)
    teach.check_array("a", np.zeros((2, 3)), np.zeros((3, 2)))
    assert "形状が (2, 3) ですが、期待される形状は (3, 2) です (要素数は同じです" in reply(capsys)
    teach.check_array("l", [(np.ones(2), np.ones(3))], [(np.ones(2), np.ones(4))])
    assert "要素 [0][1]: 形状が (3,)" in reply(capsys)
    monkeypatch.setenv("COLLSIM_REVEAL", "1")  # the answers below, asked for
    teach.check_function("f", lambda a: a + 1, lambda a: a * 2, [(1,), (3,)])
    assert "ケース 2 (a=3): 4 が返りましたが、期待値は 6 です" in reply(capsys)
    teach.check_rank(
        "r",
        1,
        expected=3,
        ranks=4,
        why="参加していません",
        about={1: "all_reduce #2 で待っています"},
    )
    assert reply(capsys).startswith(
        "まだ正解ではありません。r: あなたが挙げたのはランク 1 ですが、"
        "all_reduce #2 で待っています。正解はランク 3 です: 参加していません。"
    )
    teach.check_rank("r", 7, expected=3, ranks=4, why="x")
    assert "ランク 7 は存在しません: ランクは 0 から 3 です" in reply(capsys)
    assert teach.check("u", None, expected=1, unit="B") is None
    assert "None を「あなたの答え (バイト数)」に置き換えて" in reply(capsys)


LESSON = """\
from collsim import teach

bytes_per_rank_answer = None  # your prediction: bytes each rank sends

result = teach.check("6.1", bytes_per_rank_answer, expected=1536, unit="B", ranks=4)
"""


@pytest.fixture
def japanese_lesson(tmp_path):
    """A lesson file in a folder named ja, with its solutions beside it."""
    folder = tmp_path / "ja"
    (folder / "solutions").mkdir(parents=True)
    path = folder / "06_demo.py"
    path.write_text(LESSON, encoding="utf-8")
    (folder / "solutions" / path.name).write_text("bytes_per_rank_answer = 1536\n", "utf-8")
    return path


def test_a_lesson_in_a_ja_folder_answers_in_japanese_with_no_code_of_its_own(
    japanese_lesson, capsys, monkeypatch
):
    assert runpy.run_path(str(japanese_lesson))["result"] is None
    out = reply(capsys)
    assert f"{japanese_lesson.name}:3: bytes_per_rank_answer = ... と書き換えます" in out
    assert out.startswith("演習 6.1: ") and out.endswith("このセルをもう一度実行してください。")
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    assert runpy.run_path(str(japanese_lesson))["result"] is True
    assert reply(capsys) == "正解です！ 6.1: 1,536 B (1.5 KiB)"


def test_collsim_lang_en_forces_english_even_in_a_ja_folder(japanese_lesson, capsys, monkeypatch):
    monkeypatch.setenv("COLLSIM_LANG", "en")
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    runpy.run_path(str(japanese_lesson))
    assert reply(capsys) == "Correct! 6.1: 1,536 B (1.5 KiB)"


def test_a_japanese_locale_gives_japanese_feedback(capsys, monkeypatch):
    monkeypatch.setenv("LANG", "ja_JP.UTF-8")
    teach.check("x", 3, expected=3, unit="GPUs")
    assert reply(capsys) == "正解です！ x: 3 GPUs"


def test_a_notebook_opened_from_a_ja_folder_answers_in_japanese(tmp_path, capsys, monkeypatch):
    # a notebook cell has no file; Jupyter runs the kernel in the notebook's folder
    (tmp_path / "ja").mkdir()
    monkeypatch.chdir(tmp_path / "ja")
    cell = 'from collsim import teach\nteach.check("1.1", 4, expected=4, unit="GPUs")\n'
    exec(compile(cell, "/tmp/ipykernel_1/3.py", "exec"), {})
    assert reply(capsys) == "正解です！ 1.1: 4 GPUs"
    monkeypatch.chdir(tmp_path)
    exec(compile(cell, "/tmp/ipykernel_1/4.py", "exec"), {})
    assert reply(capsys) == "Correct! 1.1: 4 GPUs"


def test_solutions_mode_raises_in_japanese(japanese_lesson, monkeypatch):
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    (japanese_lesson.parent / "solutions" / japanese_lesson.name).write_text(
        "bytes_per_rank_answer = 768\n", encoding="utf-8"
    )
    with pytest.raises(teach.LessonCheckError, match="答えの半分です"):
        runpy.run_path(str(japanese_lesson))


# ---- collsim lesson --lang ------------------------------------------------------------

TINY = """\
# %% [markdown]
# # {n}. {title}
# {line}

# %%
from collsim import teach

# %%

guess_answer = None  # bytes in a KiB

# %%
teach.check("{n}.1", guess_answer, expected=1024, unit="B")

# %% [markdown]
# ## {last}
"""


TINY_JA = """\
<!-- cell 1 -->
# 1. 小さなレッスン
演習が 1 つあります。

<!-- cell 2 -->
## まとめ

<!-- strings -->
```diff
- # bytes in a KiB
+ # 1 KiB のバイト数
```
"""


@pytest.fixture
def lessons(tmp_path):
    """Two English lessons, one of them translated (its prose only)."""
    root = tmp_path / "lessons"
    (root / "solutions").mkdir(parents=True)
    for n, title in [(1, "Tiny"), (2, "Second")]:
        text = TINY.format(n=n, title=title, line="One exercise.", last="Takeaways")
        (root / f"{n:02d}_tiny.py").write_text(text, encoding="utf-8")
        (root / "solutions" / f"{n:02d}_tiny.py").write_text("guess_answer = 2**10\n")
    (root / "ja").mkdir()
    (root / "ja" / "01_tiny.md").write_text(TINY_JA, encoding="utf-8")
    return root


def test_lesson_list_in_japanese_shows_the_japanese_titles_and_what_is_missing(lessons, capsys):
    assert main(["lesson", "list", "--lang", "ja", "--dir", str(lessons)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ 1  小さなレッスン +0/1\n    演習が 1 つあります。$", out, re.M)
    assert "Tiny" not in out and "まだ日本語版のないレッスン: 2" in out


def test_the_locale_picks_japanese_and_lang_en_overrides_it(lessons, capsys, monkeypatch):
    monkeypatch.setenv("LANG", "ja_JP.UTF-8")
    assert main(["lesson", "list", "--dir", str(lessons)]) == 0
    assert "小さなレッスン" in capsys.readouterr().out
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    assert main(["lesson", "1", "--lang", "en", "--no-pause", "--dir", str(lessons)]) == 0
    out = capsys.readouterr().out
    assert "# 1. Tiny" in out and "Correct! 1.1: 1,024 B (1 KiB)" in out
    assert "COLLSIM_LANG" not in __import__("os").environ  # restored after the run


def test_lesson_runs_in_japanese_with_japanese_feedback(lessons, capsys, monkeypatch):
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    assert main(["lesson", "1", "--lang", "ja", "--no-pause", "--dir", str(lessons)]) == 0
    out = capsys.readouterr().out
    assert "# 1. 小さなレッスン" in out and "正解です！ 1.1: 1,024 B (1 KiB)" in out


def test_lang_ja_builds_the_lesson_from_the_english_code_and_the_japanese_prose(
    lessons, capsys, monkeypatch
):
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    assert main(["lesson", "1", "--lang", "ja", "--no-pause", "--dir", str(lessons)]) == 0
    built = (lessons / "ja" / "01_tiny.py").read_text(encoding="utf-8")
    english = (lessons / "01_tiny.py").read_text(encoding="utf-8")
    for en, ja in [
        ("# 1. Tiny\n# One exercise.", "# 1. 小さなレッスン\n# 演習が 1 つあります。"),
        ("# bytes in a KiB", "# 1 KiB のバイト数"),
        ("# ## Takeaways", "# ## まとめ"),
    ]:
        english = english.replace(en, ja)
    assert built == english, "the English code with the Japanese prose and comment"
    assert (lessons / "ja" / "solutions" / "01_tiny.py").read_text() == "guess_answer = 2**10\n"
    assert "正解です！ 1.1" in capsys.readouterr().out


def test_the_built_lesson_keeps_the_students_answers_until_its_sources_change(
    lessons, capsys, monkeypatch
):
    """The student writes answers into the built lesson: a run keeps them; a newer English
    lesson or translation rebuilds it and keeps the student's copy as .bak."""
    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)
    assert main(["lesson", "1", "--lang", "ja", "--no-pause", "--dir", str(lessons)]) == 0
    built = lessons / "ja" / "01_tiny.py"
    answered = built.read_text(encoding="utf-8").replace(
        "guess_answer = None", "guess_answer = 1024"
    )
    built.write_text(answered, encoding="utf-8")
    capsys.readouterr()
    assert main(["lesson", "1", "--lang", "ja", "--no-pause", "--dir", str(lessons)]) == 0
    assert "正解です！ 1.1" in capsys.readouterr().out and built.read_text() == answered
    source = lessons / "ja" / "01_tiny.md"
    source.write_text(TINY_JA.replace("演習が 1 つ", "演習がひとつ"), encoding="utf-8")
    later = built.stat().st_mtime + 10
    os.utime(source, (later, later))
    assert main(["lesson", "1", "--lang", "ja", "--no-pause", "--dir", str(lessons)]) == 0
    out = capsys.readouterr().out
    assert "演習がひとつ" in built.read_text() and "guess_answer = None" in built.read_text()
    assert (lessons / "ja" / "01_tiny.py.bak").read_text() == answered
    assert "01_tiny.py.bak に残してあります" in out


def test_lesson_build_writes_every_japanese_lesson_without_running_it(lessons, capsys):
    assert main(["lesson", "build", "--lang", "ja", "--dir", str(lessons)]) == 0
    out = capsys.readouterr().out
    built = lessons / "ja" / "01_tiny.py"
    assert f"{built} に作りました" in out and "正解" not in out and "01_tiny.py:" not in out
    assert built.read_text(encoding="utf-8").splitlines()[1] == "# # 1. 小さなレッスン"
    assert not (lessons / "ja" / "02_tiny.py").exists()  # not translated: nothing to build
    assert main(["lesson", "build", "--lang", "ja", "--dir", str(lessons)]) == 0
    assert capsys.readouterr().out == "", "an up-to-date lesson is left as it is"
    assert main(["lesson", "build", "--lang", "en", "--dir", str(lessons)]) == 2
    assert "need no build" in capsys.readouterr().err


def test_a_translation_missing_a_cell_is_refused_by_name(lessons, capsys):
    source = lessons / "ja" / "01_tiny.md"
    source.write_text(TINY_JA.split("<!-- cell 2 -->")[0], encoding="utf-8")
    assert main(["lesson", "1", "--lang", "ja", "--no-pause", "--dir", str(lessons)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "01_tiny.md: 1 prose sections for 2 markdown cells" in err


def test_a_japanese_lesson_not_yet_translated_is_named_with_the_nearest(lessons, capsys):
    assert main(["lesson", "2", "--lang", "ja", "--dir", str(lessons)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no Japanese lesson 2 yet" in err and "the nearest Japanese lesson is 1" in err
    assert "collsim lesson 2 --lang en" in err


def test_no_japanese_folder_is_a_collsim_error(tmp_path, capsys):
    (tmp_path / "01_x.py").write_text("# %%\nx = 1\n", encoding="utf-8")
    assert main(["lesson", "list", "--lang", "ja", "--dir", str(tmp_path)]) == 2
    assert "no Japanese lessons at" in capsys.readouterr().err


@given(
    value=st.one_of(
        st.sampled_from(["fr", "jp", "", " ", "en-US", "日本語", "ja ja", "1"]),
        st.text(string.ascii_letters + "-_.", min_size=1, max_size=8).filter(
            lambda s: (
                s.strip().lower() not in ("en", "ja", "english", "japanese")
                and not s.lower().startswith(("en_", "ja_"))
                and not s.startswith("-")
            )
        ),
    )
)
def test_a_bad_lang_is_refused_by_name_before_any_work(value):
    for command in (["lesson", "list"], ["lesson", "99"], ["tour", "--no-pause"]):
        outcome = run_cli([*command, "--lang", value], bad=value, timeout=5)
        assert outcome.status != 0


@pytest.mark.parametrize("command", ["lesson", "tour"])
def test_help_says_lang(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--lang" in text and "ja" in text and "LANG" in text


# ---- collsim tour --lang ja ------------------------------------------------------------

NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?")


def test_the_japanese_tour_has_the_same_runs_and_numbers(capsys):
    assert main(["tour", "--no-pause"]) == 0
    english = capsys.readouterr().out
    assert main(["tour", "--no-pause", "--lang", "ja"]) == 0
    japanese = capsys.readouterr().out
    assert "1 対 1 通信" in japanese and "データ並列" in japanese and "閉形式" in japanese
    assert "point to point" not in japanese and "closed form" not in japanese
    # every number the English tour prints is printed in Japanese too (which may add some:
    # "1 対 1"), and the step views, read from the same runs, are the same lines
    missing = list(NUMBER.findall(english))
    for number in NUMBER.findall(japanese):
        if number in missing:
            missing.remove(number)
    assert not missing, missing
    views = [
        line for line in english.splitlines() if line.startswith("  rank ") or "  chunk " in line
    ]
    assert views and all(line in japanese.splitlines() for line in views)
    assert "step 1 of 6" in japanese  # the views are `collsim step`'s
