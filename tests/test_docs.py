"""The documentation site builds with ``mkdocs build --strict`` and its reference misses no name.

Strict mode turns every mkdocs warning into an error: a link to a page or heading that does not
exist, a page left out of the nav, an API directive (``::: queuepipe.x``) naming a module or object
that does not exist. These tests need the ``docs`` extra (``pip install -e '.[docs]'``); without it
they fail rather than skip, because CI must build the docs.
"""

import importlib
import importlib.util
import os
import pathlib
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

import queuepipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
API = os.path.join(DOCS, "api")
BUILD_TIMEOUT_SECS = 50


def load_ext(name):
    """A module of docs/_ext: the build code (mkdocs hook, griffe extension) of the site."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(DOCS, "_ext", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Where the API pages document each public name (the hook's index links there too).
reference_id = load_ext("public_names").reference_id


def mkdocs_build(config_dir, site_dir):
    """Runs ``mkdocs build --strict`` for ``config_dir``/mkdocs.yml; returns the finished process."""
    try:
        import mkdocs  # noqa: F401 - only asks whether the docs extra is installed
    except ImportError:
        pytest.fail("mkdocs is not installed: the docs build is part of CI; "
                    "install the docs extra with pip install -e '.[docs]'")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=config_dir, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECS)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built from the checkout, once for this module."""
    site_dir = tmp_path_factory.mktemp("site")
    done = mkdocs_build(ROOT, site_dir)
    if done.returncode != 0:
        pytest.fail(f"mkdocs build --strict exited {done.returncode}:\n{done.stderr}{done.stdout}")
    return site_dir


def test_strict_build_succeeds(site):
    assert os.path.isfile(os.path.join(site, "index.html"))
    assert os.path.isfile(os.path.join(site, "api", "index.html"))


def test_strict_build_fails_on_a_broken_link(tmp_path):
    # Proves the check above can fail: the same pages plus a link to a missing page and one to a
    # missing heading must not build. (The API pages are emptied to keep this build quick.)
    project = tmp_path / "project"
    shutil.copytree(DOCS, project / "docs")
    shutil.copy(os.path.join(ROOT, "mkdocs.yml"), project / "mkdocs.yml")
    for folder, _, files in os.walk(project / "docs" / "api"):
        for file in files:
            with open(os.path.join(folder, file), "w", encoding="utf-8") as page:
                page.write("# An API page\n")
    with open(project / "docs" / "concepts.md", "a", encoding="utf-8") as page:
        page.write("\nSee [the missing page](no-such-page.md) and "
                   "[a missing heading](index.md#no-such-heading).\n")
    done = mkdocs_build(project, tmp_path / "site")
    output = done.stderr + done.stdout
    assert done.returncode != 0, output
    assert "no-such-page.md" in output
    assert "no-such-heading" in output


def test_every_qp_name_in_the_pages_exists():
    # The pages are written against the API: a renamed or misspelt `qp.x.y` in prose, a table
    # or an example is found here, also where no example runs.
    wrong = []
    for folder, _, files in os.walk(DOCS):
        for file in sorted(f for f in files if f.endswith(".md")):
            path = os.path.join(folder, file)
            with open(path, encoding="utf-8") as page:
                text = page.read()
            for dotted in sorted(set(re.findall(r"\bqp((?:\.[A-Za-z_]\w*)+)", text))):
                value = queuepipe
                for attribute in dotted[1:].split("."):
                    try:
                        value = getattr(value, attribute)
                    except AttributeError:
                        wrong.append(f"{os.path.relpath(path, DOCS)}: qp{dotted}")
                        break
    assert not wrong, f"names the pages use that queuepipe does not have: {wrong}"


def test_the_migration_guide_names_every_public_name():
    with open(os.path.join(DOCS, "migration.md"), encoding="utf-8") as page:
        text = page.read()
    missing = [name for name in queuepipe.__all__ if name != "__version__"
               and not re.search(rf"\bqp\.(?:\w+\.)?{re.escape(name)}\b", text)]
    assert not missing, f"public names without a row in docs/migration.md: {missing}"


def test_rest_in_docstrings_becomes_markdown():
    import griffe  # the docs extra; missing, the test fails as the build tests do
    rest = load_ext("griffe_rest")
    module = griffe.visit("m", filepath=pathlib.Path("m.py"), code="class Coordinator:\n    pass\n")
    text = ("Uses :class:`Coordinator` and :func:`~queuepipe.runner.start_queue_runners`.\n\n"
            "Usage::\n\n    x = 1\n\nArgs:\n  a, b: shared text\n    more.\n  c: own.\n\n"
            "Raises:\n  ValueError: bad c.\n  The errors of\n    read.\n")
    assert rest._markdown(module, text) == (
        'Uses <autoref identifier="m.Coordinator" optional><code>Coordinator</code></autoref> '
        'and <autoref identifier="queuepipe.runner.start_queue_runners" optional>'
        "<code>start_queue_runners</code></autoref>.\n\n"
        "Usage:\n\n    x = 1\n\n"
        "Args:\n  a: shared text\n    more.\n  b: shared text\n    more.\n  c: own.\n\n"
        "Raises:\n  ValueError: bad c.\n\nThe errors of\nread.\n")


def cookbook_blocks():
    """The cookbook's ``python`` code blocks, in order, without those marked ``<!-- not run``."""
    with open(os.path.join(DOCS, "cookbook.md"), encoding="utf-8") as page:
        text = page.read()
    blocks = re.finditer(r"^(<!-- not run[^\n]*-->\n)?```python\n(.*?)^```$", text,
                         re.MULTILINE | re.DOTALL)
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in blocks if not m.group(1)]


def test_cookbook_recipes_run(tmp_path, monkeypatch):
    # The recipes run as one script, as the page says, in a pipeline of their own so that their
    # runners do not join the default pipeline of the tests that follow.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    try:  # write_shards shows a tqdm bar when tqdm is installed; its monitor thread would
        import tqdm  # outlive the test
    except ImportError:
        pass
    else:
        monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)
    blocks = cookbook_blocks()
    assert len(blocks) >= 8
    namespace = {"__name__": "cookbook"}
    with queuepipe.Pipeline().as_default():
        for line, code in blocks:
            exec(compile("\n" * (line - 1) + code, "docs/cookbook.md", "exec"), namespace)


def rendered_ids(site):
    ids = set()
    for folder, _, files in os.walk(os.path.join(site, "api")):
        for file in files:
            if file.endswith(".html"):
                with open(os.path.join(folder, file), encoding="utf-8") as page:
                    ids.update(re.findall(r'\bid="(queuepipe[\w.]*)"', page.read()))
    return ids


def test_every_public_name_is_in_the_reference(site):
    # A name whose module is not in the checkout is the package's problem, not the docs': the
    # test below then insists that the module gets a page once it exists.
    ids = rendered_ids(site)
    missing = sorted(
        f"{name} (expected #{reference_id(name)})" for name in queuepipe.__all__
        if importlib.util.find_spec(queuepipe._LAZY.get(name, "queuepipe")) is not None
        and reference_id(name) not in ids)
    assert not missing, f"public names missing from the API pages (docs/api/*.md): {missing}"


def public_modules(package):
    """The public modules of ``package`` and, recursively, of its public subpackages."""
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        name = f"{package.__name__}.{info.name}"
        found.add(name)
        if info.ispkg:
            found |= public_modules(importlib.import_module(name))
    return found


def test_every_public_module_has_a_reference_page():
    directives = set()
    for folder, _, files in os.walk(API):
        for file in files:
            with open(os.path.join(folder, file), encoding="utf-8") as page:
                directives.update(re.findall(r"^::: ([\w.]+)", page.read(), re.MULTILINE))
    missing = sorted(public_modules(queuepipe) - directives)
    assert not missing, f"modules without a '::: module' directive in docs/api/: {missing}"


# -- the site offline, in a browser ---------------------------------------------------------


def _nodes(node):
    yield node
    for child in node.get("children", []) + node.get("shadowRoots", []):
        yield from _nodes(child)


@pytest.mark.timeout(180)
def test_the_concepts_page_draws_its_diagrams_with_nothing_fetched_from_another_host(site):
    """Material loads mermaid from unpkg.com unless the page has it; the site brings its own,
    so the diagrams render from file:// on a machine without a network."""
    from browser import Browser

    with open(os.path.join(site, "concepts.html"), encoding="utf-8") as f:
        diagrams = f.read().count('class="mermaid"')
    assert diagrams == 4
    with Browser() as browser:
        browser.open(pathlib.Path(site, "concepts.html").as_uri())
        assert browser.wait_for(f"document.querySelectorAll('div.mermaid').length == {diagrams}"
                                f" && !document.querySelector('pre.mermaid')"), \
            "the diagrams were not rendered"
        svgs = [node for node in _nodes(browser.document()) if node.get("nodeName") == "svg"
                and any(a == "id" and v.startswith("__mermaid_")
                        for a, v in zip(node["attributes"][::2], node["attributes"][1::2]))]
        requests = list(browser.requests)
    assert len(svgs) == diagrams
    assert requests and all(url.split(":", 1)[0] in ("file", "data", "blob")
                            for url in requests), [u for u in requests if u.startswith("http")]
    assert any(url.endswith("/javascripts/mermaid.min.js") for url in requests)


def test_pages_link_to_html_files_so_file_urls_browse(site):
    with open(os.path.join(site, "index.html"), encoding="utf-8") as f:
        page = f.read()
    assert 'href="concepts.html"' in page and 'href="concepts/"' not in page


@pytest.mark.parametrize("ci", ["", "true"])
def test_without_chromium_the_browser_test_skips_naming_it_except_under_ci(monkeypatch, ci):
    """30.4: ``make test`` runs where Chromium cannot be installed; the browser test then says
    what is missing, and only CI insists on it."""
    import browser

    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match=r"^Chromium is not installed \(no 'chromium' or "
                                      r"'chromium-browser' on PATH\)"):
        browser.Browser()


def test_make_test_does_not_stop_where_chromium_cannot_be_installed(tmp_path):
    """30.4: the Makefile's chromium step, with no Chromium and no root, says so and succeeds."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")  # not root
    (bin_dir / "id").chmod(0o755)
    done = subprocess.run([make, "-s", "chromium", "SHELL=/bin/sh"], cwd=ROOT,
                          env={"PATH": str(bin_dir)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "the docs' browser test will be skipped" in done.stderr


@pytest.mark.timeout(180)
def test_the_search_finds_pages_from_a_file_url_with_nothing_fetched_from_another_host(site):
    """30.4: opened from file://, Material's search stayed at "Initializing search" (its worker
    fetches the index, which a browser refuses for file:// URLs); the offline plugin ships the
    index as a script, and the site serves the iframe-worker shim itself."""
    from browser import Browser

    with Browser() as browser:
        browser.open(pathlib.Path(site, "index.html").as_uri())
        assert browser.wait_for("document.querySelector('.md-search__input') !== null")
        browser.evaluate("(() => { const box = document.querySelector('.md-search__input');"
                         " box.focus(); box.value = 'Coordinator';"
                         " box.dispatchEvent(new Event('input', {bubbles: true})); })()")
        assert browser.wait_for("document.querySelectorAll('.md-search-result__item').length"
                                " > 0"), browser.evaluate(
            "document.querySelector('.md-search-result__meta').textContent.trim()")
        meta = browser.evaluate("document.querySelector('.md-search-result__meta')"
                                ".textContent.trim()")
        requests = list(browser.requests)
    assert re.fullmatch(r"\d+ matching documents", meta), meta
    assert all(url.split(":", 1)[0] in ("file", "data", "blob") for url in requests), \
        [url for url in requests if url.startswith("http")]
