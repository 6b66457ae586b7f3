"""Every figure the README quotes beside a command is what that command prints (issue 25,
item 18: the pipeline picture's caption said 15.8 % where the command shown gave 16.0 %).

Each `Quote` is a command as the README prints it, a pattern that finds the quoted figure in
the README and one that finds the same figure in the command's output (for a command that
draws, in the SVG it writes: matplotlib keeps each text as a comment). The two are compared at
the precision the README quotes, so changing either the sentence or the output fails here
until they agree again. Only commands that take a few seconds are run; the benchmark tables,
timed on one machine, are not.
"""

import contextlib
import functools
import html
import io
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

from collsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"


class Quote(NamedTuple):
    command: str  # as the README prints it (whitespace aside)
    readme: str  # regex over the README's text; group 1 is the figure as quoted
    output: str  # regex over the command's output; group 1 is the same figure as printed
    readme_file: str = "docs/commands.md"  # where the README's commands and pictures moved


PIPELINE = "collsim pipeline --stages 4 --microbatches 8 --schedule interleaved --virtual 2"
TIMELINE = (
    "collsim viz timeline --schedule interleaved --stages 4 --microbatches 8 --virtual 2 "
    "--latency 0 --bandwidth inf --out timeline.png"
)
NCCL_INFO = "collsim run all-reduce --topology dgx-a100 --nodes 2 --size 8MiB --count-only"
CLOSED_FORM = NCCL_INFO + " --choice closed-form"
CALIBRATION = "python benchmarks/calibration.py"


def _calibration(preset, algorithm, published):
    readme = rf"\| {preset} \| \d+ \| {re.escape(algorithm)} \| {NUMBER} GB/s \| ~?{published}"
    ran = rf"{preset.replace(' ×', ' x')} \| \d+ \| {re.escape(algorithm.split()[0])} \(\S+\)"
    return Quote(CALIBRATION, readme, rf"\| {ran} \| 8 GiB \| {NUMBER} GB/s")


QUOTES = [
    Quote(TIMELINE, rf"v=2, free links: bubble {NUMBER}%", rf"bubble {NUMBER}% \(formula"),
    Quote(TIMELINE, rf"compute bubble shows \({NUMBER} % measured", rf"bubble {NUMBER}% \("),
    Quote(TIMELINE, rf"the closed form's {NUMBER} %", rf"= {NUMBER}%\)"),
    Quote(PIPELINE, rf"--virtual 2` measures {NUMBER} %", rf"idle per stage, {NUMBER}% of"),
    Quote(
        NCCL_INFO, rf"ll128, by NCCL's model {NUMBER} us", rf"ll128, by NCCL's model {NUMBER} us"
    ),
    Quote(NCCL_INFO, rf"\(nccl_ring/ll128 {NUMBER} us\)`", rf"\(nccl_ring/ll128 {NUMBER} us\)"),
    Quote(CLOSED_FORM, rf"ll128, predicted {NUMBER} us", rf"ll128, predicted {NUMBER} us"),
    Quote(CLOSED_FORM, rf"us \(nccl_ring/ll128 {NUMBER} us,", rf"\(nccl_ring/ll128 {NUMBER} us,"),
    Quote(CLOSED_FORM, rf"double_tree/ll128 {NUMBER} us\)", rf"double_tree/ll128 {NUMBER} us\)"),
    _calibration("dgx-a100", "auto (nccl_ring, simple)", 230),
    _calibration("dgx-h100", "nccl_ring", 370),
    _calibration("dgx-h100", "nvls", 480),
    _calibration("dgx-a100 ×2", "auto (nccl_ring, simple)", 192),
    Quote(
        CALIBRATION,
        rf"one DGX A100 takes {NUMBER} µs",
        rf"dgx-a100 \| 8 B \| \S+ \| \d+ \| {NUMBER} µs",
    ),
    Quote(
        "collsim hardware dgx-h100", rf"H100 NVLink: {NUMBER} GB/s of", rf"{NUMBER} GB/s effective,"
    ),
    Quote("collsim hardware dgx-h100", rf"{NUMBER} per H100 NVLink", rf"NVLINK_BW {NUMBER} GB/s"),
]
ZERO = "collsim verify zero --stage 2 --dp 4"
ZERO_OUTPUT = r"formula (2Ψ \+ 14Ψ/N) = [^:]+: equal"
FORMULAS = [  # a formula quoted beside a command, compared as text
    Quote(ZERO, r"per category = (2Ψ \+ 14Ψ/N)", ZERO_OUTPUT),
    Quote(ZERO, r"種類ごとに測ったメモリ = (2Ψ \+ 14Ψ/N)", ZERO_OUTPUT, "README.ja.md"),
]


@functools.cache
def readme(name="docs/commands.md"):
    """The README's text with every run of whitespace one space, as a reader sees it."""
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


@functools.cache
def output(command):
    """What ``command`` prints, run as the README shows it (a picture goes to a scratch SVG,
    whose texts are part of the output)."""
    argv = shlex.split(command)
    with tempfile.TemporaryDirectory() as scratch:
        picture = Path(scratch) / "picture.svg"
        if "--out" in argv:
            argv[argv.index("--out") + 1] = str(picture)
        if argv[0] == "python":  # a benchmark: the same interpreter, run from the checkout
            argv = [sys.executable, *argv[1:], "--out", str(picture)]
            text = subprocess.run(
                argv, cwd=ROOT, capture_output=True, text=True, check=True, timeout=300
            ).stdout
        else:
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                assert main(argv[1:]) == 0, command
            text = stdout.getvalue()
        if picture.exists():  # SVG text is <text> (svg.fonttype none; comments before)
            svg = picture.read_text()
            found = re.findall(r"<!-- (.*?) -->", svg) + re.findall(r"<text[^>]*>(.*?)</text>", svg)
            text += "\n".join(html.unescape(re.sub(r"<[^>]+>", "", t)) for t in found)
    return " ".join(text.split())


def _one(pattern, text, where):
    found = re.findall(pattern, text)
    assert len(found) == 1, f"{where}: {pattern!r} found {len(found)} times, not once"
    return found[0]


def agrees(quoted, printed):
    """The printed figure, rounded to the places the README quotes, is the quoted one.

    >>> agrees("15.8", "15.79"), agrees("15.8", "16.00"), agrees("1,200", "1200")
    (True, False, True)
    """
    places = len(quoted.partition(".")[2])
    return f"{float(printed.replace(',', '')):.{places}f}" == quoted.replace(",", "")


def _label(quote):
    """A test id: the command's first words and the README's words around the figure."""
    words = re.sub(r"[^\w ]+", " ", quote.readme.replace(NUMBER, "N"))
    return f"{' '.join(quote.command.split()[:2])}: {' '.join(words.split())}"


@pytest.mark.parametrize("quote", QUOTES, ids=_label)
def test_every_quoted_figure_is_what_its_command_prints(quote):
    text = readme(quote.readme_file)
    assert quote.command in text, f"{quote.readme_file} no longer shows `{quote.command}`"
    quoted = _one(quote.readme, text, quote.readme_file)
    printed = _one(quote.output, output(quote.command), f"`{quote.command}`")
    assert agrees(quoted, printed), f"README says {quoted}, `{quote.command}` prints {printed}"


@pytest.mark.parametrize("quote", FORMULAS, ids=lambda q: q.readme_file)
def test_every_quoted_formula_is_what_its_command_prints(quote):
    text = readme(quote.readme_file)
    assert quote.command in text
    quoted = _one(quote.readme, text, quote.readme_file)
    assert quoted == _one(quote.output, output(quote.command), f"`{quote.command}`")


def _strategies_rows(text):
    """``{strategy: (total, intra-node, inter-node, step, exposed)}`` from the README's table."""
    rows = {}
    for line in text.split("## The ND-parallelism strategies", 1)[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[2] == "yes":
            rows[cells[0]] = tuple(cells[3:8])
    return rows


def test_the_strategies_table_is_what_collsim_strategies_prints():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "`collsim strategies` runs every strategy" in text
    quoted = _strategies_rows(text)
    assert len(quoted) == 9, quoted
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["strategies"]) == 0
    size = r"(\d[\d.]* [KMG]?i?B)"
    time = r"(\d[\d.]* [mun]?s)"
    for name, (total, intra, inter, step, exposed) in quoted.items():
        name_at = rf"^{re.escape(name)}\s+"
        sizes = r"\d \d \d \d \d"  # R S C T E
        memory = re.search(rf"{name_at}{sizes}\s+yes\s+.*\s{size}$", printed.getvalue(), re.M)
        comm = re.search(rf"{name_at}{size}\s+{size}\s+{time}\s+{time}\s", printed.getvalue(), re.M)
        assert memory and comm, f"`collsim strategies` prints no row for {name}"
        assert (memory.group(1), *comm.groups()) == (total, intra, inter, step, exposed), name


# ---- the pictures the READMEs show beside the command that draws them (issue 28) ----------

MAX_README_IMAGE = 150_000  # bytes: a picture in the repository stays small
PICTURE = re.compile(r"```\s*(collsim viz [^`]*?--out (\S+\.png))\s*```\s*!\[[^\]]*\]\(\2\)", re.S)


def readme_pictures(name):
    """(command, path) of every ``collsim viz ... --out P.png`` block followed by ``![](P.png)``."""
    return PICTURE.findall((ROOT / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["README.md", "README.ja.md"])
def test_the_readme_shows_a_slide_beside_the_command_that_draws_it(name, tmp_path, capsys):
    from PIL import Image

    pictures = readme_pictures(name)
    assert any("--style slides" in command for command, _ in pictures), name
    for command, path in pictures:
        committed = ROOT / path
        assert committed.stat().st_size < MAX_README_IMAGE, path
        argv = shlex.split(command)
        argv[argv.index("--out") + 1] = str(tmp_path / "again.png")
        assert main(argv[1:]) == 0, command
        with Image.open(committed) as shown, Image.open(tmp_path / "again.png") as drawn:
            assert drawn.size == shown.size, (
                f"`{command}` draws {drawn.size}, {path} is {shown.size}"
            )
