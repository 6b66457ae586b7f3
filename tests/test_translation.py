"""A lesson's translation file (issue 26, item 6): prose sections and a string table, read
back exactly as written, applied to the English code without touching anything but markdown
cells, string literals and comments, and refused by name when it does not fit the lesson."""

import os
import shutil
from pathlib import Path

import pytest

from collsim.course.translation import (
    Translation,
    format_translation,
    parse_translation,
    translate_code,
    translate_lesson,
    unused_strings,
)
from collsim.course.working_copy import working_copy
from collsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

LESSON = '''\
# %% [markdown]
# # 1. Sizes
# How big is a KiB?

# %%
from collsim import teach

KIB = 1024  # bytes in a KiB
# the answer is a number of bytes,
# written with its unit
size_answer = None


def describe(n):
    """Say how big ``n`` is.

    In bytes."""
    return f"{n} bytes"


# %% [markdown]
# ## Takeaways
#
# - A KiB is 1024 bytes.

# %%
teach.check("1.1", size_answer, expected=KIB, unit="B")
print("done", describe(KIB))  # the end
'''

TRANSLATION = Translation(
    prose=("# 1. サイズ\n1 KiB の大きさは?", "## まとめ\n\n- 1 KiB は 1024 バイトです。"),
    strings={
        "# bytes in a KiB": "# 1 KiB のバイト数",
        "# the answer is a number of bytes,\n# written with its unit": "# 答えはバイト数",
        '"""Say how big ``n`` is.\n\n    In bytes."""': (
            '"""``n`` の大きさを言う。\n\n    バイトで。"""'
        ),
        'f"{n} bytes"': 'f"{n} バイト"',
        '"done"': '"おわり"',
    },
)


def test_a_translation_file_reads_back_as_it_was_written():
    text = format_translation(TRANSLATION)
    assert "<!-- cell 2 -->\n## まとめ\n\n- 1 KiB は 1024 バイトです。\n" in text
    assert (
        "- # the answer is a number of bytes,\n  # written with its unit\n+ # 答えはバイト数"
        in text
    )
    again = parse_translation(text)
    assert again.prose == TRANSLATION.prose and again.strings == TRANSLATION.strings


def test_the_translated_lesson_swaps_prose_strings_and_comments_and_nothing_else():
    japanese = translate_lesson(LESSON, TRANSLATION)
    assert japanese.startswith("# %% [markdown]\n# # 1. サイズ\n# 1 KiB の大きさは?\n\n# %%\n")
    assert "KIB = 1024  # 1 KiB のバイト数\n# 答えはバイト数\nsize_answer = None\n" in japanese
    assert (
        '    """``n`` の大きさを言う。\n\n    バイトで。"""\n    return f"{n} バイト"' in japanese
    )
    assert "# ## まとめ\n#\n# - 1 KiB は 1024 バイトです。\n\n# %%\n" in japanese
    assert 'print("おわり", describe(KIB))  # the end\n' in japanese  # not listed: English
    assert 'unit="B"' in japanese
    # the same rule read the other way gives the English lesson back
    undo = {v: k for k, v in TRANSLATION.strings.items()}
    undo["# 答えはバイト数"] = "# the answer is a number of bytes,\n# written with its unit"
    prose = ("# 1. Sizes\nHow big is a KiB?", "## Takeaways\n\n- A KiB is 1024 bytes.")
    assert translate_lesson(japanese, Translation(prose, undo)) == LESSON


def test_a_comment_block_translated_over_more_lines_keeps_its_indentation():
    code = "def f():\n    # one line\n    return 1\n"
    assert translate_code(code, {"# one line": "# 一行目\n# 二行目"}) == (
        "def f():\n    # 一行目\n    # 二行目\n    return 1\n"
    )


def test_only_string_and_comment_tokens_are_replaced():
    # a name, a number or the text of a markdown cell equal to an entry stays as it is
    code = '# %% [markdown]\n# "x"\n\n# %%\nx = 1  # x\ny = "x"\n'
    translation = Translation(("「x」",), {'"x"': '"エックス"', "x": "y", "1": "2"})
    assert translate_lesson(code, translation) == (
        '# %% [markdown]\n# 「x」\n\n# %%\nx = 1  # x\ny = "エックス"\n'
    )


@pytest.mark.parametrize(
    "text, named",
    [
        ("<!-- cell 2 -->\nprose\n", "expected <!-- cell 1 -->"),
        ("<!-- cell 1 -->\na\n<!-- strings -->\n<!-- cell 2 -->\nb\n", "expected <!-- cell 2 -->"),
        ("stray prose\n<!-- cell 1 -->\na\n", "'stray prose' is outside any section"),
        ('<!-- cell 1 -->\na\n<!-- strings -->\n- "a"\n- "b"\n', "come in pairs"),
        ('<!-- cell 1 -->\na\n<!-- strings -->\n- "a"\n', "come in pairs"),
    ],
    ids=["first not 1", "after strings", "outside", "two english", "no translation"],
)
def test_a_malformed_translation_is_refused_with_its_file_and_line(text, named):
    with pytest.raises(ConfigError) as info:
        parse_translation(text, source="lessons/ja/01_x.md")
    assert "lessons/ja/01_x.md:" in str(info.value) and named in str(info.value)


def test_a_translation_with_the_wrong_number_of_sections_is_refused():
    short = Translation(TRANSLATION.prose[:1], {}, "lessons/ja/01_sizes.md")
    with pytest.raises(ConfigError, match=r"01_sizes.md: 1 prose sections for 2 markdown cells"):
        translate_lesson(LESSON, short)


def test_unused_strings_names_entries_the_english_no_longer_has():
    changed = LESSON.replace('"done"', '"finished"')
    assert unused_strings([changed], TRANSLATION) == ['"done"']
    assert unused_strings([LESSON], TRANSLATION) == []


def test_the_working_copy_is_rebuilt_only_when_its_sources_are_newer(tmp_path):
    lessons = tmp_path / "lessons"
    (lessons / "ja").mkdir(parents=True)
    (lessons / "solutions").mkdir()
    english = lessons / "01_sizes.py"
    english.write_text(LESSON, encoding="utf-8")
    (lessons / "solutions" / english.name).write_text("size_answer = 1024  # bytes in a KiB\n")
    (lessons / "ja" / "01_sizes.md").write_text(format_translation(TRANSLATION), "utf-8")
    built = working_copy(english, "ja")
    assert built.rebuilt and built.lesson == lessons / "ja" / "01_sizes.py" and not built.backup
    assert built.lesson.read_text(encoding="utf-8") == translate_lesson(LESSON, TRANSLATION)
    solved = (lessons / "ja" / "solutions" / english.name).read_text(encoding="utf-8")
    assert solved == "size_answer = 1024  # 1 KiB のバイト数\n"
    built.lesson.write_text("size_answer = 1024\n", encoding="utf-8")  # the student's edit
    assert working_copy(english, "ja").rebuilt is False
    later = built.lesson.stat().st_mtime + 10
    os.utime(english, (later, later))
    again = working_copy(english, "ja")
    assert again.rebuilt and again.backup == lessons / "ja" / "01_sizes.py.bak"
    assert again.backup.read_text() == "size_answer = 1024\n"


def test_a_lesson_folder_copied_elsewhere_builds_there(tmp_path):
    # the repository's lesson 4 and its translation, copied: the build needs nothing else
    for name in (
        "04_ring_allreduce.py",
        "ja/04_ring_allreduce.md",
        "solutions/04_ring_allreduce.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "lessons" / name, tmp_path / name)
    built = working_copy(tmp_path / "04_ring_allreduce.py", "ja")
    assert built.lesson.read_text(encoding="utf-8").splitlines()[1] == (
        "# # 4. リング all-reduce を 1 ステップずつ"
    )
