"""How pictures look (issue 28, items 1, 6 and 8): slide options on every `collsim viz`
kind, editable SVG text, colours that stay apart under colour-vision deficiencies, and
Japanese labels with a font that can draw them, or a message saying how to get one."""

import itertools
import re

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from PIL import Image

from collsim import cli
from collsim.cli import viz as _registers_the_kinds  # noqa: F401
from collsim.cli.viz_kinds import KINDS
from collsim.collectives.registry import algorithms_for
from collsim.parallel.runs.pipeline import pipeline_step
from collsim.viz import style, words
from collsim.viz.memory_timeline import COLLECTIVE_COLOURS
from collsim.viz.sweep import ALGORITHM_COLOURS
from collsim.viz.timeline import timeline_figure

# ---- item 1: the slide options ----------------------------------------------------------


def test_slides_are_1920_by_1080_with_larger_text_than_paper(tmp_path):
    sizes = {}
    for name in ("paper", "slides"):
        out = tmp_path / f"{name}.png"
        assert cli.main(["viz", "timeline", "--style", name, "--out", str(out)]) == 0
        sizes[name] = Image.open(out).size
    assert sizes["slides"] == (1920, 1080)
    assert sizes["paper"] != (1920, 1080)  # paper keeps the figure's own shape
    assert style.look("slides").rc()["font.size"] > style.look("paper").rc()["font.size"]


def test_dark_theme_transparent_dpi_aspect_and_title_reach_the_file(tmp_path):
    out = tmp_path / "dark.png"
    argv = ["viz", "memory", "--params", "1B", "--world-size", "8", "--theme", "dark"]
    argv += ["--dpi", "50", "--width", "8", "--aspect", "2:1", "--out", str(out)]
    assert cli.main(argv) == 0
    image = Image.open(out).convert("RGB")
    assert image.size == (400, 200)
    assert sum(image.getpixel((2, 2))) < 3 * 60  # a dark corner
    clear = tmp_path / "clear.png"
    argv = ["viz", "timeline", "--transparent", "--title", "My slide", "--out", str(clear)]
    assert cli.main(argv) == 0
    assert Image.open(clear).convert("RGBA").getpixel((1, 1))[3] == 0  # see-through
    svg = tmp_path / "titled.svg"
    assert cli.main(["viz", "timeline", "--title", "My slide", "--out", str(svg)]) == 0
    assert ">My slide</text>" in svg.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", ["ring", "timeline", "sweep"])
def test_svg_text_stays_text_so_it_can_be_edited(kind, tmp_path):
    out = tmp_path / f"{kind}.svg"
    extra = ["--ranks", "4", "--max-bytes", "1KiB"] if kind == "sweep" else []
    assert cli.main(["viz", kind, *extra, "--out", str(out)]) == 0
    assert len(re.findall(r"<text\b", out.read_text(encoding="utf-8"))) > 5


@pytest.mark.parametrize(
    "flag,value,named",
    [
        ("--style", "poster", "paper, slides"),
        ("--theme", "blue", "light, dark"),
        ("--dpi", "0", "10 to 600"),
        ("--width", "-3", "1 to 60"),
        ("--aspect", "16x9", "16:9"),
        ("--lang", "fr", "'ja'"),
    ],
)
def test_a_bad_look_is_refused_before_drawing_naming_the_choices(flag, value, named, capsys):
    assert cli.main(["viz", "timeline", flag, value, "--out", "x.png"]) == 2
    err = capsys.readouterr().err
    assert value in err and named in err


def test_every_kind_lists_the_look_flags_in_its_help(capsys):
    for name in KINDS:
        with pytest.raises(SystemExit):
            cli.main(["viz", name, "--help"])
        text = capsys.readouterr().out
        assert all(flag in text for flag in ("--style", "--theme", "--aspect", "--lang")), name


def test_the_same_look_from_python_as_a_context_and_as_keywords():
    result = pipeline_step("1f1b", stages=2, microbatches=2)
    with style.use("slides", theme="dark"):
        inside = timeline_figure(result)
    keywords = timeline_figure(result, style="slides", theme="dark")
    plain = timeline_figure(result)
    for fig in (inside, keywords):
        assert [round(x, 2) for x in fig.get_size_inches()] == [13.33, 7.5]
        assert fig.get_facecolor()[:3] == to_rgb(style.THEMES["dark"]["figure.facecolor"])
    assert plain.get_facecolor()[:3] == (1, 1, 1)  # the look ends with its context


# ---- item 6: colours a colour-blind reader can tell apart -------------------------------

# Machado, Oliveira & Fernandes (2009), "A Physiologically-based Model for Simulation of
# Color Vision Deficiency", IEEE TVCG 15(6), Table 1 at severity 1.0 (linear RGB)
PROTANOPIA = np.array(
    [
        [0.152286, 1.052583, -0.204868],
        [0.114503, 0.786281, 0.099216],
        [-0.003882, -0.048116, 1.051998],
    ]
)
DEUTERANOPIA = np.array(
    [
        [0.367322, 0.860646, -0.227968],
        [0.280085, 0.672501, 0.047413],
        [-0.011820, 0.042940, 0.968881],
    ]
)
MIN_DELTA_E = 10.0  # CIE76 distance two series keep; the former palettes fell to 1.3-3.5


def lab(colour, deficiency):
    """CIELAB (D65) of ``colour`` as a reader with ``deficiency`` (3x3 or identity) sees it."""
    rgb = np.array(to_rgb(colour))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    seen = np.clip(deficiency @ linear, 0, 1)
    to_xyz = np.array(
        [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]
    )
    xyz = to_xyz @ seen / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def closest_pair(colours):
    """(ΔE, a, b, vision) of the two ``colours`` closest under any of the three visions."""
    return min(
        (float(np.linalg.norm(lab(a, m) - lab(b, m))), a, b, vision)
        for vision, m in (
            ("normal", np.eye(3)),
            ("protanopia", PROTANOPIA),
            ("deuteranopia", DEUTERANOPIA),
        )
        for a, b in itertools.combinations(colours, 2)
    )


def test_the_simulation_merges_the_red_green_pair_it_should():
    # a red and a green of equal lightness: distinct to normal vision, one for deuteranopes
    normal = np.linalg.norm(lab("#D62728", np.eye(3)) - lab("#2CA02C", np.eye(3)))
    deutan = np.linalg.norm(lab("#D62728", DEUTERANOPIA) - lab("#2CA02C", DEUTERANOPIA))
    assert normal > 60 and deutan < normal / 3


def test_the_palette_and_the_memory_categories_stay_apart():
    assert closest_pair(style.PALETTE)[0] >= MIN_DELTA_E
    shown_together = [*style.CATEGORY_COLOURS.values(), *COLLECTIVE_COLOURS.values()]
    assert closest_pair(shown_together)[0] >= MIN_DELTA_E, closest_pair(shown_together)


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "broadcast"])
def test_the_algorithms_of_one_sweep_stay_apart(collective):
    names = set(algorithms_for(collective, 16))
    if collective == "all_reduce":  # and NCCL's, on a DGX preset
        names |= {"nccl_ring", "double_tree", "hierarchical", "nvls", "nvls_tree"}
    closest = closest_pair(sorted({ALGORITHM_COLOURS[n] for n in names}))
    assert len({ALGORITHM_COLOURS[n] for n in names}) == len(names)
    assert closest[0] >= MIN_DELTA_E, closest


# ---- item 8: Japanese labels --------------------------------------------------------------


def labels_of(fig):
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if a_text(t)]


def a_text(artist):
    return bool(getattr(artist, "get_text", lambda: "")())


def test_japanese_labels_and_a_cjk_font_when_one_is_installed(monkeypatch):
    monkeypatch.setattr(style, "cjk_font", lambda: "Noto Sans CJK JP")
    monkeypatch.setattr(words, "cjk_font", lambda: "Noto Sans CJK JP")
    result = pipeline_step("1f1b", stages=2, microbatches=2)
    with style.use(lang="ja") as chosen:
        fig = timeline_figure(result)
    texts = labels_of(fig)
    assert "ステージ 0" in texts and any(t.startswith("シミュレーション時間") for t in texts)
    assert chosen.rc()["font.sans-serif"][0] == "Noto Sans CJK JP"


def test_without_a_cjk_font_the_labels_stay_english_and_it_says_how_to_install_one(
    monkeypatch, capsys
):
    monkeypatch.setattr(style, "cjk_font", lambda: None)
    monkeypatch.setattr(words, "cjk_font", lambda: None)
    monkeypatch.setattr(words, "_say_how_to_install", _once(words.INSTALL_HINT))
    result = pipeline_step("1f1b", stages=2, microbatches=2)
    for _ in range(2):
        with style.use(lang="ja"):
            fig = timeline_figure(result)
    assert "stage 0" in labels_of(fig)  # English, never empty boxes
    err = capsys.readouterr().err
    assert err.count("fonts-noto-cjk") == 1  # said once


def _once(message):
    import sys

    said = []

    def say():
        if not said:
            print(message, file=sys.stderr)
            said.append(True)

    return say


def test_collsim_lang_picks_japanese_for_viz(monkeypatch, tmp_path):
    monkeypatch.setattr(style, "cjk_font", lambda: "DejaVu Sans")  # any installed font
    monkeypatch.setattr(words, "cjk_font", lambda: "DejaVu Sans")
    monkeypatch.setenv("COLLSIM_LANG", "ja")
    out = tmp_path / "timeline.svg"
    assert (
        cli.main(["viz", "timeline", "--stages", "2", "--microbatches", "2", "--out", str(out)])
        == 0
    )
    assert "ステージ 0" in out.read_text(encoding="utf-8")


def test_the_figure_words_use_the_lessons_glossary():
    from pathlib import Path

    from collsim.teach.messages import CATALOG

    glossary = Path(__file__).resolve().parents[1] / "lessons" / "ja" / "GLOSSARY.md"
    banned = []
    for line in glossary.read_text(encoding="utf-8").splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cols) == 3 and cols[2] and cols[2] != "使わない訳語":
            banned += [t.strip() for t in re.split(r"[/、,]", cols[2]) if t.strip()]
    assert "アクティベーション" in banned  # the table was read
    for english, japanese in words.JA.items():
        assert CATALOG["ja"][english] == japanese  # one catalog with the lessons
        assert not [t for t in banned if t in japanese], (english, japanese)


def test_the_sweep_reads_its_time_axis_in_microseconds_and_milliseconds(tmp_path):
    out = tmp_path / "sweep.svg"
    argv = ["viz", "sweep", "--ranks", "4", "--max-bytes", "64MiB", "--out", str(out)]
    assert cli.main(argv) == 0
    ticks = re.findall(r">(\d[\d.]* (?:µs|ms))</text>", out.read_text(encoding="utf-8"))
    assert {t.split()[1] for t in ticks} == {"µs", "ms"}, ticks


@pytest.mark.parametrize("kind", ["ring", "utilization"])
def test_times_drawn_on_a_figure_say_microseconds_as_its_axes_do(kind, tmp_path, monkeypatch):
    # the subtitles said "12.62 us" beside axes and figures that say "µs"
    from collsim.viz import output

    saved = []
    monkeypatch.setattr(output, "save_figure", lambda fig, *a, **k: saved.append(fig))
    assert cli.main(["viz", kind, "--out", str(tmp_path / "t.png")]) == 0
    texts = [t.get_text() for t in saved[0].findobj(lambda a: hasattr(a, "get_text"))]
    assert any(re.search(r"\d µs", t) for t in texts)
    assert not [t for t in texts if re.search(r"\d us\b", t)]
