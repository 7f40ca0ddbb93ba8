"""A griffe extension that renders the reST bits of our docstrings as Markdown for mkdocstrings.

queuepipe's docstrings are Google style (``Args:``, ``Returns:``, ``Raises:``) and, like
TensorFlow's and CPython's, they use a few reST spellings: roles such as
``:class:`Coordinator``` or ``:func:`~queuepipe.runner.start_queue_runners``` and the literal
block marker ``Usage::``. mkdocstrings renders Markdown, which would show those literally. This
extension, run by griffe after it has loaded the package, rewrites every docstring:

- a role becomes an *optional* autorefs cross-reference: a link when the name (resolved in the
  scope of the object that carries the docstring, as Python would) is documented on some page,
  plain code otherwise. An unresolvable name is never an error, so a docstring cannot break the
  strict build by naming something outside the reference (``numpy.dtype``, a private helper).
  ``~a.b.C`` shows ``C``, as in Sphinx.
- an ``Args:`` item that documents several parameters at once (``rank, world_size: ...``)
  becomes one item per parameter, each with the same text; griffe would otherwise look for a
  single parameter named ``rank, world_size`` and fail the build. A ``Raises:`` item that
  names no exception ("The errors of :meth:`read`.") is moved after the section as a
  paragraph, for the same reason.
- a paragraph ending in ``::`` ends in ``:``, and a ``.. code-block:: python`` line goes: the
  indented block after either is already a Markdown code block.

Configured in mkdocs.yml under the python handler's ``extensions``.
"""

from __future__ import annotations

import html
import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|obj|exc|data|const):`(~?)([\w.]+)(\(\))?`")
_LITERAL_MARKER = re.compile(r"(\S)::[ \t]*$", re.MULTILINE)
_CODE_DIRECTIVE = re.compile(r"^[ \t]*\.\. (?:code-block|code|sourcecode)::.*\n", re.MULTILINE)
_SECTION_HEADER = re.compile(
    r"^([ \t]*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Raises):[ \t]*$")
_GROUPED_PARAMS = re.compile(r"^([ \t]*)(\w+(?:[ \t]*,[ \t]*\w+)+)([ \t]*(?:\([^)]*\))?:.*)$")
_NAMED_ITEM = re.compile(r"^[ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*(?:\([^)]*\))?:")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _rewrite_sections(text: str) -> str:
    """Rewrites the items of ``Args:`` and ``Raises:`` sections that griffe cannot parse.

    An ``Args:`` item ``a, b: text`` becomes one item per name, each with the text. A
    ``Raises:`` item that names no exception ("The errors of :meth:`read`.") leaves the
    section and follows it as a paragraph.
    """
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        header = _SECTION_HEADER.match(lines[i])
        out.append(lines[i])
        i += 1
        if not header:
            continue
        section_indent, raises = header.group(1), header.group(2) == "Raises"
        after = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > len(section_indent)):
            item = [lines[i]]
            i += 1
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) > _indent(item[0]):
                item.append(lines[i])
                i += 1
            grouped = None if raises else _GROUPED_PARAMS.match(item[0])
            if raises and item[0].strip() and not _NAMED_ITEM.match(item[0]):
                after.extend(section_indent + line.strip() for line in item)
            elif grouped:
                for name in grouped.group(2).split(","):
                    out.append(f"{grouped.group(1)}{name.strip()}{grouped.group(3)}")
                    out.extend(item[1:])
            else:
                out.extend(item)
        if after:
            while out and not out[-1].strip():
                out.pop()
            out.extend([""] + after + [""])
    return "\n".join(out)


def _identifier(obj: griffe.Object, name: str) -> str:
    """The full path ``name`` refers to in ``obj``'s scope, or ``name`` itself when unknown."""
    head, _, rest = name.partition(".")
    try:
        resolved = obj.resolve(head)
    except (griffe.NameResolutionError, griffe.AliasResolutionError, KeyError):
        return name
    return f"{resolved}.{rest}" if rest else resolved


def _markdown(obj: griffe.Object, text: str) -> str:
    def role(match: re.Match) -> str:
        tilde, name, call = match.groups()
        shown = (name.rsplit(".", 1)[-1] if tilde else name) + (call or "")
        identifier = html.escape(_identifier(obj, name), quote=True)
        return f'<autoref identifier="{identifier}" optional><code>{html.escape(shown)}</code></autoref>'

    text = _CODE_DIRECTIVE.sub("", _ROLE.sub(role, _rewrite_sections(text)))
    return _LITERAL_MARKER.sub(r"\1:", text)


def _walk(obj: griffe.Object):
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)


class SphinxRoles(griffe.Extension):
    """Rewrites reST roles and ``::`` markers in every docstring of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _markdown(obj, obj.docstring.value)
