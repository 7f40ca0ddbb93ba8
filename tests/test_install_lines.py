"""Every ``pip install`` line the README, the docs, the examples and the error messages give
works from a checkout: it installs the checkout (``.`` or ``<queuepipe checkout>``, since no
package index has queuepipe), with extras that setup.cfg defines. One of them is run with
``pip --dry-run``, the checkout's path in place of the placeholder."""

import configparser
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLACEHOLDER = "<queuepipe checkout>"
# A requirement a line installs: '.[a,b]', ".", '<queuepipe checkout>[a]' (quoted or not).
INSTALL = re.compile(r"pip install (?:-e |-q )*(?P<req>'[^']+'|\"[^\"]+\"|\S+)")


def install_lines():
    files = ["README.md"] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                             recursive=True))
    files += sorted(glob.glob(os.path.join(ROOT, "queuepipe", "**", "*.py"), recursive=True))
    files += sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))
    found = []
    for path in files:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for match in INSTALL.finditer(line):
                    found.append((f"{os.path.relpath(os.path.join(ROOT, path), ROOT)}:{number}",
                                  match.group("req").strip("'\"`.,;)")))
    return found


def extras_defined():
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "setup.cfg"))
    return set(config["options.extras_require"])


def test_every_install_line_installs_the_checkout_with_extras_it_has():
    lines = install_lines()
    peers = [(where, req) for where, req in lines if "performance.md" in where]
    # PyTorch's CPU build, installed before the [torch] extra (docs/index.md says why).
    cpu_torch = [(where, req) for where, req in lines if req == "torch==2.13.0"]
    assert cpu_torch, "the docs say how to install the CPU build of PyTorch"
    ours = [(where, req) for where, req in lines if (where, req) not in peers + cpu_torch]
    assert len(ours) >= 15  # the README, the docs, the error messages, the examples
    extras = extras_defined()
    for where, req in ours:
        target, _, wanted = req.partition("[")
        assert target in ("", PLACEHOLDER), f"{where}: installs {req!r}, not the checkout"
        unknown = set(filter(None, wanted.rstrip("]").split(","))) - extras
        assert not unknown, f"{where}: extras {sorted(unknown)} are not in setup.cfg"


def test_the_placeholder_form_installs(tmp_path):
    target = f"{ROOT}[torch,progress]"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", target],
                          capture_output=True, text=True, timeout=55, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
