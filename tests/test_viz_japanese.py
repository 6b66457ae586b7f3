"""Every word a `collsim viz` figure draws with `--lang ja` is Japanese (issue 28, item 8):
titles, notes, captions, legends, axis labels and tick labels come from the catalog
(collsim.viz.words, the lessons' own) with their numbers formatted in, so what is left in
Latin letters is a number, a unit, a symbol or a proper name (an algorithm, a machine, a
library, a variable of a formula).

A Japanese font is needed to draw them; the machine running the tests may have none, so
the font lookup is given one by name (DejaVu Sans: the glyphs are not what is checked),
and the last test shows the fallback when there is none: English labels and one message
naming the package to install.
"""

import json
import re
import warnings

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from collsim import cli
from collsim.cli import viz as _registers_the_kinds  # noqa: F401
from collsim.cli.viz_kinds import KINDS
from collsim.viz import output, style, words

# Latin-letter words a Japanese figure keeps: names of algorithms, collectives, machines,
# libraries and formats, units, and the letters of formulas and rank names
PROPER = {
    # collectives and algorithms, as the CLI and NCCL name them
    *"all-reduce reduce-scatter all-gather broadcast reduce all-to-all".split(),
    *"ring tree double-tree halving-doubling hd naive direct one-shot two-shot".split(),
    *"nccl-ring hierarchical nvls nvls-tree pat auto simple ll ll128 ring-on-ring".split(),
    *"NVLS PAT NCCL nccl-tests busbw algbw".split(),
    # machines, links, libraries, models, schedules
    *"NVSwitch nvswitch NVLink NIC PCIe InfiniBand GPU GPUs DGX A100 H100 dgx-a100".split(),
    *"dgx-h100 dgx-a100x2 dgx-h100x2 switch torus2d bidirectional_ring fully_connected".split(),
    *"Megatron Megatron-LM Accelerate PyTorch Adam ZeRO FSDP DDP HSDP DP TP PP CP EP".split(),
    *"ND Transformer MoE vLLM DeepEP".split(),
    *"Llama GPT gpt llama bf16 fp16 fp32 GPipe 1F1B 1f1b gpipe interleaved zb-h1 ZB-H1".split(),
    *"dp tp pp cp ep dp_replicate dp_shard K/V megatron accelerate".split(),
    *"REPLICATE SHARD fabric".split(),  # Accelerate's dp_replicate, a topology's node
    # units and their prefixes
    *"B KiB MiB GiB TiB KB MB GB TB s ms us µs ns GB/s TB/s GiB/s TFLOP/s GFLOP/s".split(),
    *"FLOP FLOPs FLOP/s".split(),
    # the letters of formulas, ranks, chunks, groups and passes
    *"r c g n p m t v k K S N P F B W M G L H x e mod log".split(),
}
TOKEN = re.compile(r"[0-9A-Za-z_/'.+·-]+")
MATH = re.compile(r"\$[^$]*\$")  # matplotlib's math text: 10⁻³ on a log axis


def english_words(text):
    """The Latin-letter words of ``text`` that are not a proper name, a unit or a symbol
    (a formula's letters come one at a time: ``(p-1)/(m+p-1)``, ``r0``, ``c2-3``, ``8x1x1x1``).

    >>> english_words("ステップ 3/14: r0 → r1, c2-3 (128 KiB), all-reduce, FSDP+TP, ZeRO-2")
    []
    >>> english_words("step 3 of 14")
    ['step', 'of']
    """
    found = []
    for token in TOKEN.findall(MATH.sub("", text)):
        token = token.strip(".,'-/·")
        if token in PROPER:
            continue
        for word in re.split(r"[+-]", token):  # FSDP+TP, KiB-512, nvls-tree's parts
            word = word.strip(".,'/·")
            if not re.search("[A-Za-z]", word) or word in PROPER:
                continue
            if max(len(run) for run in re.findall("[A-Za-z]+", word)) <= 1:
                continue  # a formula: each letter a variable
            if re.fullmatch(r"ZeRO|[a-z]+\d+|\d+f\d+b", word):
                continue  # a numbered name: rail0, nvswitch1, 1f1b
            found.append(word)
    return found


def drawn_texts_of(fig):
    """The text of every non-empty Text the figure draws when it renders."""
    seen = []
    draw = Text.draw

    def record(text, renderer):
        draw(text, renderer)
        if text.get_visible() and text.get_text().strip() and text.get_alpha() != 0:
            seen.append(text.get_text())

    Text.draw = record
    try:
        FigureCanvasAgg(fig).draw()
    finally:
        Text.draw = draw
    return seen


@pytest.fixture
def japanese_font(monkeypatch):
    """A font lookup that finds one (the glyphs are not what these tests check)."""
    monkeypatch.setattr(style, "cjk_font", lambda: "DejaVu Sans")
    monkeypatch.setattr(words, "cjk_font", lambda: "DejaVu Sans")
    warnings.filterwarnings("ignore", message="Glyph .* missing from font")


def japanese_figure(kind, argv, monkeypatch, tmp_path):
    saved = []
    monkeypatch.setattr(output, "save_figure", lambda fig, *a, **k: saved.append(fig))
    out = tmp_path / "ja.png"
    assert cli.main(["viz", kind, *argv, "--lang", "ja", "--out", str(out)]) == 0
    (fig,) = saved
    return fig


# beyond the defaults: the shapes of the other algorithms, the presets, a mesh with every
# dimension, and the pipeline schedules that mark more
MORE = {
    "ring": [
        ["--algorithm", "tree", "--topology", "switch"],
        ["--algorithm", "nvls", "--topology", "dgx-h100", "--step", "1"],
        ["--algorithm", "nvls_tree", "--topology", "dgx-h100", "--nodes", "2"],
        ["--algorithm", "nccl_ring", "--topology", "dgx-a100", "--nodes", "2"],
        ["all-gather", "--algorithm", "pat", "--topology", "switch"],
        ["--cells", "sources", "--ranks", "4"],
    ],
    "timeline": [
        ["--schedule", "interleaved", "--virtual", "2"],
        ["--schedule", "zb-h1"],
        ["--slow-rank", "1:2x"],  # a straggler's row marked
    ],
    "utilization": [
        ["--topology", "dgx-a100", "--nodes", "2"],
        ["--topology", "ring", "--slow-link", "0-1:2x", "--crash-rank", "3@20us"],  # a stall
        ["--topology", "bidirectional_ring", "--fail-link", "0-1@5us"],  # a detour
    ],
    "traffic": [["--topology", "hierarchical"]],
    "mesh": [["--order", "accelerate", "--dp-replicate", "2", "--cp", "2"]],
    "sweep": [["--ranks", "4", "--max-bytes", "64KiB"]],
    "scaling": [["--weak"]],
}
CASES = [(kind, []) for kind in sorted(KINDS)]
CASES += [(kind, argv) for kind, many in MORE.items() for argv in many]


@pytest.mark.parametrize(
    "kind,argv", CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_every_word_drawn_in_japanese_is_japanese(
    kind, argv, japanese_font, monkeypatch, tmp_path, capsys
):
    fig = japanese_figure(kind, argv, monkeypatch, tmp_path)
    texts = drawn_texts_of(fig)
    assert any(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", t) for t in texts)
    english = {t: english_words(t) for t in texts if english_words(t)}
    assert english == {}


def test_animation_captions_are_japanese(japanese_font, monkeypatch, tmp_path, capsys):
    out = tmp_path / "ring.html"
    assert cli.main(["viz", "ring", "--ranks", "3", "--lang", "ja", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    captions = re.search(r"var captions = (\[.*?\]);", page, re.S)
    assert captions, page[:200]
    shown = json.loads(captions.group(1))  # what the page writes over each frame
    assert any("ステップ" in c for c in shown)
    assert {c: english_words(c) for c in shown if english_words(c)} == {}
    assert '<html lang="ja">' in page


def test_without_a_japanese_font_the_labels_stay_english_and_it_says_how_to_get_one(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(style, "cjk_font", lambda: None)
    monkeypatch.setattr(words, "cjk_font", lambda: None)
    words._say_how_to_install.cache_clear()  # said once a process: say it in this test
    fig = japanese_figure("ring", [], monkeypatch, tmp_path)
    texts = drawn_texts_of(fig)
    assert not any(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", t) for t in texts)  # no tofu
    assert "fonts-noto-cjk" in capsys.readouterr().err
