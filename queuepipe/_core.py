"""Which implementation runs the record path: the compiled core or the pure-Python path.

The compiled core, the extension ``queuepipe._qpcore`` built from ``queuepipe/_core/*.c``
by ``pip install``, is loaded once, here, at ``import queuepipe``. :data:`core` is the module,
or None when the pure path runs; the modules with two implementations (framing in
``queuepipe._frames`` and ``queuepipe.records``) pick theirs from it. Environment switches,
read once at import:

- ``QUEUEPIPE_PURE=1``: the pure path, even where the core is built.
- ``QUEUEPIPE_REQUIRE_CORE=1``: a core that is missing, does not load or is stale is an
  ``ImportError`` at ``import queuepipe`` (so that a build that fell back cannot pass CI).

Otherwise a core that cannot be used gives one ``RuntimeWarning`` and the pure path.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType
from typing import Optional, Tuple

__all__ = ["ABI_VERSION", "core", "description"]

# The version of the interface between this Python code and the C module: the same number
# as QP_ABI_VERSION in queuepipe/_core/module.c, bumped together. A module built from an
# older source (an editable install's stale build) has another number and is refused.
ABI_VERSION = 29


def _switch(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _load() -> Tuple[Optional[ModuleType], str]:
    """The core and what to say about it; raises ImportError only when it is required."""
    if _switch("QUEUEPIPE_PURE"):
        return None, "not used: the pure-Python path is forced (QUEUEPIPE_PURE=1)"
    try:
        module = importlib.import_module("queuepipe._qpcore")
    except ImportError as error:
        problem = f"the compiled core queuepipe._qpcore is not built or does not load ({error})"
    else:
        found = getattr(module, "ABI_VERSION", None)
        if found == ABI_VERSION:
            return module, f"compiled and loaded from {module.__file__}"
        problem = (f"the compiled core {module.__file__} is stale: its ABI_VERSION is "
                   f"{found!r}, this queuepipe needs {ABI_VERSION}; rebuild it (make, or "
                   f"pip install -e . again)")
    if _switch("QUEUEPIPE_REQUIRE_CORE"):
        raise ImportError(f"QUEUEPIPE_REQUIRE_CORE is set but {problem}")
    warnings.warn(f"queuepipe runs on its pure-Python path, correct but slower: {problem}",
                  RuntimeWarning, stacklevel=2)
    return None, f"not used: {problem}"


core, description = _load()
