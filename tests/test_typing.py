"""Type checkers see what users call: mypy passes on the package and the examples, and the
lazy namespaces (``qp``, ``qp.train``, ``qp.io``, ``qp.python_io``) show each name's real
signature, not ``Any`` (their ``TYPE_CHECKING`` imports list every name of the lazy table)."""

import ast
import importlib
import os
import subprocess
import sys

import pytest

import queuepipe as qp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mypy(*args):
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True,
                          text=True)


@pytest.mark.timeout(300)  # a cold mypy cache takes about 40 s on two cores
def test_mypy_passes_on_the_package_and_the_examples():
    done = mypy("queuepipe", "examples")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Success: no issues found" in done.stdout


@pytest.mark.timeout(300)
def test_the_namespaces_reveal_real_signatures(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import queuepipe as qp\n"
                     "reveal_type(qp.FIFOQueue)\nreveal_type(qp.train.shuffle_batch)\n"
                     "reveal_type(qp.io.parse_example)\nreveal_type(qp.python_io.TFRecordWriter)\n"
                     "reveal_type(qp.train.Coordinator)\nreveal_type(qp.io.decode_jpeg)\n")
    revealed = [line for line in mypy(str(probe)).stdout.splitlines() if "Revealed type" in line]
    assert len(revealed) == 6
    assert all('Revealed type is "def (' in line for line in revealed), revealed


@pytest.mark.parametrize("module", ["queuepipe", "queuepipe.train", "queuepipe.io",
                                    "queuepipe.python_io", "queuepipe.image"])
def test_the_type_checking_imports_list_the_lazy_table(module):
    namespace = importlib.import_module(module)
    table = getattr(namespace, "_TABLE", None) or namespace._LAZY
    with open(namespace.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    guarded = next(node for node in tree.body if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING")
    imported = {(node.module, alias.name) for node in guarded.body
                if isinstance(node, ast.ImportFrom) and node.module != "queuepipe"
                for alias in node.names}
    assert imported == {(source, name) for name, source in table.items()}
    assert qp.FIFOQueue.__module__ == "queuepipe.queues"  # the names still load at run time


@pytest.mark.timeout(300)
def test_mypy_sees_the_package_the_install_made(tmp_path):
    """30.4: the editable install ``make`` makes is visible to mypy run outside the checkout,
    with nothing on PYTHONPATH or MYPYPATH (setuptools' default editable mode installs an
    import hook that type checkers cannot follow; the Makefile asks for ``editable_mode=compat``,
    a ``.pth`` line they read)."""
    probe = tmp_path / "probe.py"
    probe.write_text("import queuepipe as qp\nreveal_type(qp.FIFOQueue)\n")
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "MYPYPATH")}
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental",
                           "--python-executable", sys.executable, str(probe)],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert 'Revealed type is "def (capacity: int' in done.stdout, (
        "mypy cannot find queuepipe in this environment's install: install it as the Makefile "
        "does (pip install --config-settings editable_mode=compat -e .; `make test` reinstalls "
        f"when the Makefile changes)\n{done.stdout[-2000:]}")
