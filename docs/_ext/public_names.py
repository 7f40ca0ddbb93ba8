"""mkdocs hook: the API overview's index of every public name, made from queuepipe's own tables.

A page that contains the line ``<!-- public-names -->`` gets, in its place, a table of every
name in ``queuepipe.__all__``: the TF-shaped namespaces it can be reached from (``qp.train``,
``qp.io``, ...) and the module that defines it, linked to its reference entry. The table is
built from ``queuepipe._LAZY`` and the namespaces' ``__all__``, so it cannot drift from the
package. tests/test_docs.py uses :func:`reference_id` to check that every name is documented.

Configured in mkdocs.yml under ``hooks``.
"""

from __future__ import annotations

import html
import types

import queuepipe
from queuepipe import dtypes, errors, io, python_io, train

MARKER = "<!-- public-names -->"
NAMESPACES = (("qp.train", train), ("qp.io", io), ("qp.python_io", python_io),
              ("qp.errors", errors))


def reference_id(name: str) -> str:
    """The anchor of the reference entry of ``qp.<name>``: its defining module's path + name."""
    if name in queuepipe._LAZY:
        return f"{queuepipe._LAZY[name]}.{name}"
    value = getattr(queuepipe, name)
    if isinstance(value, types.ModuleType):
        return value.__name__
    for module in (errors, dtypes):
        if name in module.__all__:
            return f"{module.__name__}.{name}"
    return f"queuepipe.{name}"


def _link(name: str) -> str:
    # An optional cross-reference: a link once the entry is rendered, plain code before.
    return (f'<autoref identifier="{html.escape(reference_id(name))}" optional>'
            f"`{name}`</autoref>")


def table() -> str:
    rows = ["| name | also in | defined in |", "|---|---|---|"]
    for name in sorted(queuepipe.__all__, key=str.lower):
        spaces = ", ".join(f"`{label}`" for label, space in NAMESPACES if name in space.__all__)
        home = reference_id(name).rpartition(".")[0]
        rows.append(f"| {_link(name)} | {spaces} | `{home}` |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs) -> str:
    return markdown.replace(MARKER, table()) if MARKER in markdown else markdown
