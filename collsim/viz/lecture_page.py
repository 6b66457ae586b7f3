"""The HTML animation as a page for a lecture hall: it fits the window, keeps its controls
on screen, steps with a presentation clicker and shows each frame's caption as text.

matplotlib's ``HTMLWriter`` writes the player (frames embedded as PNG, a slider, play and
step buttons, its ``Animation`` object in ``anim<id>``).  :func:`lecture_html` keeps that
player and adds three things around it, in one self-contained file:

* **Fit.** The page is one column the height of the window: the caption, the picture
  (scaled down with its aspect kept, ``max-height`` what the caption and the controls
  leave), the controls in one row.  At 1920×1080 nothing scrolls.
* **Keys.** → / PageDown / space step forward, ← / PageUp / Shift+space back, Home and End
  go to the first and last frame: a clicker sends PageDown and PageUp (some send the
  arrows), so the page steps without a click on the slider first.
* **Captions.** Each frame's caption (``"reduce-scatter 2/3 (step 2 of 6)"``) as text
  above the picture, set with the frame, so it can be read aloud, copied or translated.

It also makes the file the same bytes every run and independent of the network: a fixed
element id, no web font (each button icon becomes a character every font has).

>>> page = '<link rel="stylesheet"\\nhref="https://x/font-awesome.css">' \\
...        '<img id="_anim_img0123abcd"><i class="fa fa-play"></i>'
>>> html = lecture_html(page, "demo", ["initial state", "step 1 of 1"])
>>> "https" in html, "_anim_imgcollsim" in html, "&#9654;" in html, "PageDown" in html
(False, True, True, True)
"""

import html
import json
import re

from ..errors import ConfigError

__all__ = ["lecture_html", "KEYS", "ANIMATION_ID", "CAPTION_ID"]

ANIMATION_ID = "collsim"  # the player's element ids end in this; its object is anim<this>
CAPTION_ID = "collsim-caption"
KEYS = {  # key (KeyboardEvent.key) -> the player's method
    "ArrowRight": "next_frame",
    "PageDown": "next_frame",
    " ": "next_frame",
    "ArrowLeft": "previous_frame",
    "PageUp": "previous_frame",
    "Home": "first_frame",
    "End": "last_frame",
}
# matplotlib's page asks a web font (Font Awesome, from a CDN) for its button icons:
# offline, the buttons would be blank, so each icon becomes a character every font has
BUTTON_TEXT = {
    "fa fa-minus": "&minus;",
    "fa fa-fast-backward": "|&#9664;&#9664;",
    "fa fa-step-backward": "&#9664;|",
    "fa fa-play fa-flip-horizontal": "&#9664;",
    "fa fa-pause": "&#10074;&#10074;",
    "fa fa-play": "&#9654;",
    "fa fa-step-forward": "|&#9654;",
    "fa fa-fast-forward": "&#9654;&#9654;|",
    "fa fa-plus": "+",
}
# one column the window's height: caption and controls take what they need, the picture
# the rest (min-height: 0 lets a flex item shrink below the image's own size); "body"
# outranks the rules of matplotlib's own style element, which comes later in the page
STYLE = """<style>
html, body { height: 100%; margin: 0; }
body { font-family: sans-serif; }
body .animation { display: flex; flex-direction: column; align-items: center;
  height: 100vh; width: 100vw; box-sizing: border-box; padding: 0.4em; }
body #collsim-caption { flex: 0 0 auto; margin: 0.2em 0; font-size: 1.6em; }
body .animation img { flex: 1 1 auto; min-height: 0; min-width: 0; max-width: 100%;
  max-height: 100%; object-fit: contain; }
body .anim-controls { flex: 0 0 auto; display: flex; flex-wrap: wrap; align-items: center;
  justify-content: center; gap: 0.6em; }
body .anim-buttons { margin: 0; }
body .anim-buttons button { width: auto; min-width: 2.6em; padding: 0.1em 0.3em; font-size: 1.1em; }
body input[type=range].anim-slider { width: 20em; margin: 0; }
</style>"""
# the caption follows every frame change (buttons, slider, play, keys), and the keys call
# the player's own methods; preventDefault keeps space from scrolling and a focused slider
# from stepping a second time
SCRIPT = """<script>
(function() {
  var captions = %(captions)s;
  var keys = %(keys)s;
  var setFrame = Animation.prototype.set_frame;
  Animation.prototype.set_frame = function(frame) {
    setFrame.call(this, frame);
    document.getElementById("%(caption_id)s").textContent = captions[frame];
  };
  document.addEventListener("keydown", function(event) {
    var player = window.anim%(anim_id)s;
    var method = keys[event.key];
    if (!player || !method || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === " " && event.shiftKey) method = "previous_frame";
    event.preventDefault();
    player.pause_animation();
    player[method]();
  });
})();
</script>"""


def lecture_html(page, title, captions, lang="en"):
    """A complete HTML document around ``page`` (what ``HTMLWriter`` wrote), fitted to the
    window, stepped by keys, with ``captions`` (one per frame) shown as text."""
    ids = set(re.findall(r"_anim_img([0-9a-f]+)", page))
    for random_id in ids:  # one animation per page: one id
        page = page.replace(random_id, ANIMATION_ID)
    page = re.sub(r'<link rel="stylesheet"\s+href="[^"]*font-awesome[^"]*">\s*', "", page)
    for icon, text in BUTTON_TEXT.items():
        page = page.replace(f'<i class="{icon}"></i>', text)
    leftover = re.findall(r'(?:href|src)="(?:https?:)?//[^"]*"', page)
    if leftover:  # a newer matplotlib added a resource: fail here, not in a browser
        raise ConfigError(f"the HTML animation still refers to {leftover[0]}; cannot embed it")
    first = html.escape(captions[0]) if captions else ""
    caption = f'<p id="{CAPTION_ID}" aria-live="polite">{first}</p>'
    page = page.replace('<div class="animation">', f'<div class="animation">\n  {caption}', 1)
    script = SCRIPT % {
        "captions": json.dumps(list(captions)),
        "keys": json.dumps(KEYS, sort_keys=True),
        "caption_id": CAPTION_ID,
        "anim_id": ANIMATION_ID,
    }
    head = (
        f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n{STYLE}\n</head>\n<body>\n"
    )
    return head + page + "\n" + script + "\n</body>\n</html>\n"
