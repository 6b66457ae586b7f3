"""A headless Chromium driven over the DevTools protocol on a pipe, for the page tests.

``--remote-debugging-pipe`` makes Chromium read protocol messages (JSON, each ended by a
NUL byte) from its file descriptor 3 and write replies to 4; no port, no extra package.
:class:`Browser` opens one page, evaluates JavaScript in it and sends real key events.
"""

import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM = "/usr/bin/chromium"
INSTALL = "apt install chromium"  # Debian's package; the tests skip with this without it
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--remote-debugging-pipe",
)
KEY_CODES = {"ArrowRight": 39, "ArrowLeft": 37, "PageDown": 34, "PageUp": 33, " ": 32}
KEY_NAMES = {" ": "Space"}


class Browser:
    """``with Browser(url, 1920, 1080) as page: page.evaluate("document.title")``."""

    def __init__(self, url, width, height, timeout=30.0):
        self.url, self.width, self.height, self.timeout = url, width, height, timeout
        self._next_id = 0

    def __enter__(self):
        self._profile = tempfile.mkdtemp(prefix="collsim-chromium-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # the child's fds 3 and 4 must be the pipe ends: put them there before exec (by way
        # of high numbers, in case a pipe end is itself 3 or 4); subprocess closes the other
        # fds after preexec_fn, keeping pass_fds
        read_end, write_end = to_browser, from_browser

        def wire():
            os.dup2(read_end, 200)
            os.dup2(write_end, 201)
            os.dup2(200, 3)
            os.dup2(201, 4)

        self._process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(read_end)
        os.close(write_end)
        self._buffer = b""
        targets = self._call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self._call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        self._session = attached["sessionId"]
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.call("Page.navigate", url=self.url)
        self.wait_for("document.readyState === 'complete' && window.animcollsim !== undefined")
        return self

    def __exit__(self, *exc):
        self._process.kill()
        self._process.wait(timeout=10)
        os.close(self._write)
        os.close(self._read)
        shutil.rmtree(self._profile, ignore_errors=True)

    def call(self, method, **params):
        """One protocol command on the page's session; its result."""
        return self._call(method, session=self._session, **params)

    def evaluate(self, expression):
        """The JSON value of ``expression`` in the page."""
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise AssertionError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression):
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never made {expression} true")
            time.sleep(0.05)

    def press(self, key, shift=False):
        """A key pressed and released, as a keyboard or a presentation clicker sends it."""
        code = KEY_CODES[key]
        event = {
            "key": key,
            "code": KEY_NAMES.get(key, key),
            "windowsVirtualKeyCode": code,
            "nativeVirtualKeyCode": code,
            "modifiers": 8 if shift else 0,
        }
        if key == " ":
            event["text"] = " "
        self.call("Input.dispatchKeyEvent", type="keyDown", **event)
        self.call("Input.dispatchKeyEvent", type="keyUp", **event)

    def _call(self, method, session=None, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or self._process.poll() is not None:
                    raise TimeoutError(f"no reply from Chromium to {method}")
                if select.select([self._read], [], [], left)[0]:  # never block past the limit
                    self._buffer += os.read(self._read, 1 << 16)
            text, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(text)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply["result"]
