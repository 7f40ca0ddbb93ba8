"""mkdocs hook: the scripts Material would load from unpkg.com served from the site itself, so
that the site works offline and from ``file://``.

- ``javascripts/mermaid.min.js``: Material loads mermaid from unpkg.com when a page has a
  diagram, unless mermaid is already on the page; mkdocs.yml lists this file in
  ``extra_javascript``. Mermaid's own build, at the major version Material expects.
- ``javascripts/iframe-worker-shim.js``: Material's ``offline`` plugin (which ships the search
  index as a script, since a browser refuses to fetch a ``file://`` URL) adds the
  ``iframe-worker`` shim from unpkg.com, which runs the search worker in an iframe under
  ``file://``, unless ``extra.polyfills`` already names one; mkdocs.yml names this file.

Each file comes from its npm package at the version pinned here, fetched once with the
machine's ``npm pack`` and kept in the user's cache (``$XDG_CACHE_HOME/queuepipe-docs``, by
default ``~/.cache/queuepipe-docs``), so later builds need no network.

Configured in mkdocs.yml under ``hooks``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile

from mkdocs.exceptions import PluginError

# Where the site expects each script -> (npm package, version, the file in the package, the
# name it is cached under).
SCRIPTS = {
    "javascripts/mermaid.min.js": ("mermaid", "11.12.2", "package/dist/mermaid.min.js",
                                   "mermaid-11.12.2.min.js"),
    "javascripts/iframe-worker-shim.js": ("iframe-worker", "1.0.4", "package/shim/index.js",
                                          "iframe-worker-1.0.4-shim.js"),
}


def on_post_build(config, **kwargs) -> None:
    for script, source in SCRIPTS.items():
        target = os.path.join(config["site_dir"], *script.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(cached_script(*source), target)


def cached_script(package: str, version: str, member: str, cache_name: str) -> str:
    """The path of the cached ``member`` of npm ``package@version``, fetched when missing.

    Raises:
      PluginError: npm is missing or cannot fetch the package; the message says what to do.
    """
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cached = os.path.join(cache, "queuepipe-docs", cache_name)
    if os.path.exists(cached):
        return cached
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run(["npm", "pack", f"{package}@{version}", "--pack-destination", tmp],
                           check=True, capture_output=True, text=True, timeout=600)
            (tgz_name,) = [f for f in os.listdir(tmp) if f.endswith(".tgz")]
            with tarfile.open(os.path.join(tmp, tgz_name)) as tgz:
                extracted = tgz.extractfile(member)
                data = extracted.read() if extracted is not None else b""
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            raise PluginError(f"cannot fetch {package} {version} with npm ({e}): install "
                              f"Node.js and npm, or put the package's {member[8:]} at {cached}")
    os.makedirs(os.path.dirname(cached), exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=os.path.dirname(cached), suffix=".part")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(partial, cached)
    return cached
