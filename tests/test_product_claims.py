"""What the product says is so (issue 25): the README, the lessons, the tour and the pictures
claim only what the commands a user runs do.

- torch.distributed: code runs unchanged on collsim.distributed's API (numpy arrays) or, with
  torch installed, on the collsim torch backend (`collsim[torch]`), so no text says
  torch.distributed code runs unchanged without naming one of them (item 16; issue 29);
- the tour's part 3 says that its values are not part 1's, and its sum adds those (item 19);
- `collsim viz traffic` says that links tie instead of naming one as the busiest (item 20);
- lesson 6 says what each of its two efficiencies means on the line itself (item 21).
"""

import contextlib
import html
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.cli.lesson import lesson_text
from collsim.course.working_copy import working_copy

ROOT = Path(__file__).resolve().parents[1]

# -- item 16: torch.distributed ------------------------------------------------------------

# words that say a program runs as it is written
RUNS_UNCHANGED = re.compile(r"unchanged|unmodified|そのまま|手を加え")


def _paragraphs(text):
    """Blocks of text between blank lines; a lone ``#`` line (a blank comment line in a
    percent-format lesson) separates them too."""
    blocks = re.split(r"\n\s*#?\s*\n", text)
    return [" ".join(block.replace("#", " ").split()) for block in blocks]


def _texts():
    for path in [ROOT / "README.md", ROOT / "README.ja.md", *sorted(ROOT.glob("docs/*.md"))]:
        yield path.name, path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "lessons").glob("**/[0-9][0-9]_*.py")):
        if path.parent.name != "ja":  # a built Japanese lesson, checked from its sources below
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py")):
        yield f"lessons/ja/{path.name}", lesson_text(path, "ja")
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        main(["exec", "--help"])
    yield "collsim exec --help", help_text.getvalue()


def torch_claims_without_collsim_distributed(text):
    """Paragraphs that say code runs unchanged where torch.distributed is in view (the
    paragraph or the one before it) and that do not name collsim.distributed or the extra
    that runs real torch code, ``collsim[torch]``.

    >>> torch_claims_without_collsim_distributed("Students use torch.distributed.\\n\\n"
    ...                                          "collsim runs that code unchanged.")
    ['collsim runs that code unchanged.']
    >>> torch_claims_without_collsim_distributed("mpi4py code runs unchanged; torch.distributed"
    ...                                          "-style code on collsim.distributed.")
    []
    """
    paragraphs = _paragraphs(text)
    wrong = []
    for before, paragraph in zip(["", *paragraphs], paragraphs):
        in_view = before + " " + paragraph
        if RUNS_UNCHANGED.search(paragraph) and "torch.distributed" in in_view:
            if "collsim.distributed" not in in_view and "collsim[torch]" not in in_view:
                wrong.append(paragraph)
    return wrong


TEXTS = dict(_texts())


@pytest.mark.parametrize("name", list(TEXTS))
def test_no_text_says_torch_distributed_code_runs_unchanged(name):
    text = TEXTS[name]
    wrong = torch_claims_without_collsim_distributed(text)
    assert not wrong, f"{name}: name collsim.distributed, the API that runs:\n" + "\n".join(wrong)


def test_a_program_that_imports_torch_distributed_runs_as_the_readme_says(tmp_path):
    # with torch it runs on the collsim backend; without, it is refused naming the extra
    script = tmp_path / "uses_torch.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group()\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["exec", "-n", "2", str(script)])
    if importlib.util.find_spec("torch") is None:
        assert status == 2 and "pip install 'collsim[torch]'" in err.getvalue()
    else:
        assert status == 0, err.getvalue()
    readme = " ".join((ROOT / "docs" / "commands.md").read_text(encoding="utf-8").split())
    assert "imports `torch.distributed` itself runs unchanged on collsim's torch backend" in readme


# -- item 19: the tour's values ------------------------------------------------------------


def _tour_part(capsys, lang, number):
    assert main(["tour", "--no-pause", "--lang", lang]) == 0
    out = capsys.readouterr().out
    return out.split(f"\n== {number}. ", 1)[1].split("\n== ", 1)[0]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_tours_ring_says_its_values_changed_and_sums_them(capsys, lang):
    ring = _tour_part(capsys, lang, 3)
    before_the_steps = ring.split("initial state", 1)[0]
    stated = re.search(r"\[([\d., ]+)\]", before_the_steps)
    assert stated, f"part 3 does not say what each rank starts with:\n{before_the_steps}"
    starts = [float(v) for v in stated.group(1).split(",")]
    assert starts != [0.0, 1.0, 2.0, 3.0]  # part 1's values: part 3 says they changed
    assert "r + 1" in before_the_steps
    end = ring.strip().splitlines()[-1]
    result = float(re.search(r"\[([\d.]+),", end).group(1))
    terms = re.search(r"= ([\d+]+)", end).group(1)
    assert result == sum(starts)
    assert terms == "+".join(f"{v:g}" for v in starts)


# -- item 20: a tie is a tie ---------------------------------------------------------------


def _traffic_note(tmp_path, *flags):
    svg = tmp_path / "traffic.svg"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["viz", "traffic", *flags, "--out", str(svg)]) == 0
    # each text of the SVG is a <text> element (svg.fonttype "none": editable text)
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg.read_text())]
    return [t for t in texts if "all links" in t]


def test_viz_traffic_says_the_ring_links_tie_instead_of_naming_one(tmp_path):
    # ring all-reduce on ring(8): 1.75 MiB on every link
    (note,) = _traffic_note(tmp_path, "all-reduce", "--topology", "ring", "--algorithm", "ring")
    assert note.startswith("all 8 links tie at 1.75 MiB each"), note
    assert "busiest link" not in note


def test_viz_traffic_names_the_busiest_link_only_when_it_is_alone(tmp_path):
    (note,) = _traffic_note(tmp_path, "reduce", "--algorithm", "tree")
    assert note.startswith("busiest link r7 → r0: 7 MiB"), note  # the root's last hop
    (note,) = _traffic_note(tmp_path, "broadcast", "--algorithm", "tree")
    assert note.startswith("3 links tie as busiest at 4 MiB each (r1 → r2, r2 → r3, r3 → r4)")


# -- item 21: lesson 6's two efficiencies --------------------------------------------------


@pytest.mark.parametrize(
    "lesson, serial, overlapped",
    [
        ("06_where_scaling_stops.py", "if nothing overlaps", "if the all-reduce hides behind"),
        ("ja", "何も重ね合わせなければ", "all-reduce を計算の陰に隠せば"),
    ],
)
def test_lesson_6_names_what_each_efficiency_means(tmp_path, lesson, serial, overlapped):
    env = dict(
        os.environ, COLLSIM_SOLUTIONS="1", MPLBACKEND="Agg", COLLSIM_LESSON_OUT=str(tmp_path)
    )
    path = ROOT / "lessons" / "06_where_scaling_stops.py"
    if lesson == "ja":  # built from the English code and the Japanese prose
        path = working_copy(path, "ja", folder=tmp_path / "ja").lesson
    done = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if re.match(r"\s*\d+ GPUs? \(", line)]
    assert len(rows) == 4, done.stdout[-2000:]
    for row in rows:  # "50.6% (100.0% overlapped)" read as a contradiction
        assert re.search(rf"{serial} [\d.]+%|[\d.]+% {serial}", row), row
        assert re.search(rf"{overlapped} [\d.]+%|[\d.]+% {overlapped}", row), row
        assert not re.search(r"\d% overlapped\)", row), row
