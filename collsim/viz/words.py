"""The figures' words in English and Japanese, and the font that can draw the Japanese.

A figure writes its titles, axis labels and legends through :func:`say` with the English
text as the key (numbers arrive as ``{fields}``, already formatted, so units and digits are
the same in both languages).  :data:`JA` holds the translations, in the terms of
``lessons/ja/GLOSSARY.md``; :mod:`collsim.teach.messages` serves the same entries to the
lessons, so a lesson's sentence and its figure name a thing the same way.

Japanese needs a font with its glyphs; matplotlib's default (DejaVu Sans) has none and
would draw empty boxes.  :func:`cjk_font` looks for one among the installed fonts; when
there is none, the figure keeps its English words and :func:`font_rc` says once how to
install one, instead of drawing boxes.

Examples
--------
>>> say("simulated time ({unit})", unit="ms")
'simulated time (ms)'
>>> JA["simulated time ({unit})"].format(unit="ms")
'シミュレーション時間 (ms)'
"""

import functools
import sys

__all__ = ["say", "JA", "CJK_FONTS", "cjk_font", "font_rc", "INSTALL_HINT"]

# fonts with Japanese glyphs, most common first (Debian, Fedora, macOS, Windows)
CJK_FONTS = (
    "Noto Sans CJK JP",
    "Noto Sans JP",
    "Source Han Sans JP",
    "IPAexGothic",
    "IPAGothic",
    "TakaoGothic",
    "VL Gothic",
    "Hiragino Sans",
    "Yu Gothic",
    "MS Gothic",
)
INSTALL_HINT = (
    "collsim viz: no Japanese font is installed, so the labels stay English (the default "
    "font would draw empty boxes).  Install one and run again: Debian/Ubuntu "
    "`sudo apt install fonts-noto-cjk`, Fedora `sudo dnf install google-noto-sans-cjk-fonts`; "
    "then remove ~/.cache/matplotlib so matplotlib finds it."
)

JA = {
    # ---- shared ----
    "simulated time ({unit})": "シミュレーション時間 ({unit})",
    "memory held (binary units)": "保持しているメモリ (2 進単位)",
    "idle": "アイドル",
    # ---- pipeline timeline (timeline.py) ----
    "stage {stage}": "ステージ {stage}",
    "F: forward": "F: 順伝播",
    "B: input gradient": "B: 入力の勾配",
    "B: backward": "B: 逆伝播",
    "W: weight gradient": "W: 重みの勾配",
    "numbers: micro-batch (from 1)": "数字: マイクロバッチ (1 から)",
    "model chunk {chunk}": "モデルチャンク {chunk}",
    "warm-up": "ウォームアップ",
    "steady": "定常",
    "cool-down": "クールダウン",
    "bubble {percent} idle": "バブル: {percent} がアイドル",
    "closed form {ratio}": "閉形式 {ratio}",
    # ---- device mesh (mesh.py) ----
    "{order} order ({names}, innermost last) on {nodes} node(s) of {gpus} GPUs": (
        "{order} の順序 ({names}, 最後が最内側), {gpus} GPU のノード {nodes} 台"
    ),
    "{dim} groups": "{dim} グループ",
    "node {node}": "ノード {node}",
    "rank": "ランク",
}


def say(text, **fields):
    """``text`` in the language of the look in force (English if no Japanese font is
    installed), with ``fields`` filled in."""
    from .style import current

    if current().lang == "ja" and cjk_font() is not None:
        text = JA.get(text, text)
    return text.format(**fields) if fields else text


@functools.cache
def cjk_font():
    """The name of an installed font with Japanese glyphs, or None (looked up once)."""
    from matplotlib import font_manager

    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


@functools.cache
def _say_how_to_install():
    print(INSTALL_HINT, file=sys.stderr)


def font_rc(lang):
    """The rcParams that draw ``lang``: a CJK font first for Japanese (DejaVu Sans after
    it, for the symbols), or nothing and the hint, once, when none is installed."""
    if lang != "ja":
        return {}
    font = cjk_font()
    if font is None:
        _say_how_to_install()
        return {}
    return {"font.family": "sans-serif", "font.sans-serif": [font, "DejaVu Sans"]}
