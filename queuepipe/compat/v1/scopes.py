"""TF1's scopes: ``name_scope``, ``variable_scope``, ``device``, ``control_dependencies``.

Names are prefixed as TF prefixes them (``with tf.name_scope("input"):`` makes ``input/Cast``,
a second scope of the same name ``input_1/``), and queues made inside are named so
(``input/batch/fifo_queue``, what their errors say). ``variable_scope`` opens a name scope the
same way (there are no variables). ``device`` places nothing: every op runs on the CPU, in the
thread that evaluates it. Ops made inside ``control_dependencies(ops)`` run ``ops`` first in
each evaluation.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from queuepipe.compat.v1.graph import get_default_graph

__all__ = ["name_scope", "variable_scope", "device", "control_dependencies",
           "VariableScope", "get_variable_scope"]


def name_scope(name: Optional[str], default_name: Optional[str] = None,
               values: Any = None) -> Any:
    """``with tf.name_scope("input") as scope:`` (``scope`` is ``"input/"``)."""
    del values
    return get_default_graph().name_scope(name if name is not None else default_name)


class VariableScope:
    """What ``with tf.variable_scope(...) as scope`` gives: its ``name``."""

    def __init__(self, name: str, original_name_scope: str = ""):
        self.name = name
        self.original_name_scope = original_name_scope

    def reuse_variables(self) -> None:
        """Accepted (there are no variables)."""


@contextlib.contextmanager
def variable_scope(name_or_scope: Any, default_name: Optional[str] = None, values: Any = None,
                   **kwargs: Any) -> Iterator[VariableScope]:
    """``with tf.variable_scope("tower"):``: a name scope of that name (there are no variables:
    ``initializer``, ``reuse`` and the other arguments are accepted)."""
    del values, kwargs
    name = name_or_scope.name if isinstance(name_or_scope, VariableScope) else name_or_scope
    name = name if name is not None else default_name
    with get_default_graph().name_scope(name) as prefix:
        yield VariableScope(name or "", prefix)


def get_variable_scope() -> VariableScope:
    return VariableScope("")


@contextlib.contextmanager
def device(device_name_or_function: Any) -> Iterator[None]:
    """Accepted; every op runs on the CPU."""
    del device_name_or_function
    yield None


def control_dependencies(control_inputs: Any) -> Any:
    return get_default_graph()._names.control_dependencies(control_inputs)
