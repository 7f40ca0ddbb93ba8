"""A headless Chromium driven over the DevTools protocol on a pipe: no driver, no package.

``chromium --remote-debugging-pipe`` reads commands on its file descriptor 3 and writes replies
and events on 4, each a JSON message ended by a NUL byte. :class:`Browser` opens a page,
records every network request it makes, and evaluates JavaScript in it; the docs tests use it
to check that the built site works with no network.
"""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

# Flags for a machine with no network and no screen: no sandbox (root), and none of
# Chromium's own background requests (updates, sync, safe browsing) which would only fail.
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--remote-debugging-pipe"]


def chromium_or_skip():
    """The Chromium binary. Where it is missing the test is skipped, naming what is missing
    and how to install it (``make test`` runs where Chromium cannot be installed: no root, no
    apt); under CI (``CI=true``, where ``.ci/run`` installs it) a missing one fails the test."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        why = ("Chromium is not installed (no 'chromium' or 'chromium-browser' on PATH): the "
               "docs' browser test needs it; apt-get install chromium (as root)")
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}. Under CI=true the browser test must run")
        pytest.skip(why)
    return path


def _above_four(fd):
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 5)
    os.close(fd)
    return moved


class Browser:
    """One headless Chromium with one page. Use it as a context manager."""

    def __init__(self):
        binary = chromium_or_skip()  # before anything is opened that a skip would leave open
        self._profile = tempfile.mkdtemp(prefix="qp-chromium-")
        to_browser, self._commands = os.pipe()
        self._replies, from_browser = os.pipe()
        # Above 4, so that putting them at 3 and 4 in the child cannot overwrite one another.
        to_browser, from_browser = (_above_four(fd) for fd in (to_browser, from_browser))

        def wire():  # in the child: fd 3 reads our commands, fd 4 writes its replies
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self._process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self._session = None
        self.requests = []  # the URL of every request the page made
        try:
            target = self.send("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.send("Target.attachToTarget", targetId=target,
                                      flatten=True)["sessionId"]
            self.send("Network.enable")
            self.send("Page.enable")
        except BaseException:  # no __exit__ will run: stop the browser here
            self.close()
            raise

    def _read(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _handle(self, message):
        if message.get("method") == "Network.requestWillBeSent":
            self.requests.append(message["params"]["request"]["url"])

    def send(self, method, **params):
        """Sends one command (to the page once attached); returns its result."""
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None:
            command["sessionId"] = self._session
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        while True:
            message = self._read()
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self._handle(message)

    def open(self, url):
        self.send("Page.navigate", url=url)

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression, timeout=30.0):
        """Polls ``expression`` in the page until it is true; returns False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return True
            time.sleep(0.1)  # polling the page's own state: nothing here orders threads
        return False

    def document(self):
        """The whole DOM, shadow roots (even closed ones) included."""
        return self.send("DOM.getDocument", depth=-1, pierce=True)["root"]

    def close(self):
        try:
            self._session = None
            self.send("Browser.close")
        except (OSError, RuntimeError):
            pass
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._replies)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
