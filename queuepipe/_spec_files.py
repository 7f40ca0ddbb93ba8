"""Feature specs as text: written as the code ``queuepipe schema`` prints, read back as data.

A features file comes with a dataset as often as it is written by hand, so reading one never
executes it. :func:`read_specs` accepts two forms:

- the Python ``queuepipe schema`` prints (and the same written by hand): ``import queuepipe as
  qp``, comments, and assignments of dict literals whose values are spec calls,
  ``qp.io.FixedLenFeature([28, 28], qp.float32, default_value=0.0)``. The text is parsed with
  :mod:`ast` and only that shape is accepted: literals, ``qp``/``qp.io`` spec names and
  ``qp`` dtype names; anything else (a function call, a name, an attribute of another module)
  is refused with its line, never evaluated;
- JSON: ``{"features": {"label": {"type": "FixedLenFeature", "shape": [], "dtype":
  "int64"}}}``, or the inner dict alone (taken as ``features``).

:func:`spec_code` writes one spec as the code above.
"""

from __future__ import annotations

import ast
import json
from typing import Any, Dict, NoReturn

from queuepipe.dtypes import as_dtype
from queuepipe.parsing import FixedLenFeature, FixedLenSequenceFeature, VarLenFeature
from queuepipe.parsing._specs import _spec_dtype

__all__ = ["read_specs", "spec_code"]

_SPECS = {cls.__name__: cls for cls in (FixedLenFeature, VarLenFeature, FixedLenSequenceFeature)}
_DTYPE_NAMES = ("string", "int64", "float32")
_PREVIEW = 40  # characters of a refused construct quoted in an error


class SpecFileError(ValueError):
    """A features file that is not a dict of specs in one of the accepted forms."""


def _dtype_code(dtype) -> str:
    resolved = _spec_dtype(dtype, "spec")
    return f"qp.{'string' if resolved.kind == 'O' else resolved.name}"


def spec_code(spec) -> str:
    """``spec`` (a FixedLen, VarLen or FixedLenSequence feature) as the Python that makes it,
    which :func:`read_specs` reads back; literals are written with ``repr``."""
    name = type(spec).__name__
    if name not in _SPECS:
        raise TypeError(f"spec_code writes {sorted(_SPECS)}, got a {name}")
    if isinstance(spec, VarLenFeature):
        return f"qp.io.VarLenFeature({_dtype_code(spec.dtype)})"
    shape = "[" + ", ".join(str(dim) for dim in spec.shape) + "]"
    extra = ""
    if isinstance(spec, FixedLenSequenceFeature) and spec.allow_missing:
        extra += ", allow_missing=True"
    if spec.default_value is not None:
        extra += f", default_value={spec.default_value!r}"
    return f"qp.io.{name}({shape}, {_dtype_code(spec.dtype)}{extra})"


def read_specs(text: str, source: str) -> Dict[str, Dict[str, Any]]:
    """The dicts of specs a features file defines, by variable name (``features``, or
    ``context_features`` and ``sequence_features``), without executing anything.

    Args:
      text: the file's content: JSON, or the Python ``queuepipe schema`` prints.
      source: how to name the file in errors.

    Raises:
      SpecFileError: the text is neither form, or holds something else (the message names the
        line and quotes at most a short prefix of the construct).
    """
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _from_json(text, source)
    try:
        tree = ast.parse(text, filename="<features>")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        line = getattr(e, "lineno", None)
        where = f" line {line}" if line else ""
        raise SpecFileError(f"{source}:{where} neither JSON nor the Python queuepipe schema "
                            "prints (a syntax error)") from None
    found: Dict[str, Dict[str, Any]] = {}
    for node in tree.body:
        if isinstance(node, ast.Import) and [(a.name, a.asname) for a in node.names] == \
                [("queuepipe", "qp")]:
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Dict):
            found[node.targets[0].id] = _dict_of_specs(node.value, source)
            continue
        _refuse(node, source, "only 'import queuepipe as qp' and assignments of dicts of "
                              "specs")
    if not found:
        raise SpecFileError(f"{source}: defines no dict of specs (write one with queuepipe "
                            "schema FILE)")
    return found


def _short(text: str) -> str:
    """At most ``_PREVIEW`` characters of ``text``, escaped (no line break, no control)."""
    shown = text[:_PREVIEW].encode("unicode_escape").decode("ascii")
    return shown + ("..." if len(text) > _PREVIEW else "")


def _refuse(node: ast.AST, source: str, expected: str) -> NoReturn:
    raise SpecFileError(f"{source}: line {getattr(node, 'lineno', '?')}: expected {expected}, "
                        f"got '{_short(ast.unparse(node))}'; a features file is read as data, "
                        "never run")


def _dict_of_specs(node: ast.Dict, source: str) -> Dict[str, Any]:
    specs = {}
    for key, value in zip(node.keys, node.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            _refuse(key or node, source, "a string key")
        specs[key.value] = _spec_call(value, source)
    return specs


def _spec_call(node: ast.expr, source: str):
    if not isinstance(node, ast.Call):
        _refuse(node, source, f"a spec call ({', '.join(sorted(_SPECS))})")
    name = _qp_name(node.func, ("io",))
    if name not in _SPECS:
        _refuse(node.func, source, f"qp.io.<spec> with <spec> one of {sorted(_SPECS)}")
    args = [_literal(arg, source) for arg in node.args]
    kwargs = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            _refuse(node, source, "named arguments")
        kwargs[keyword.arg] = _literal(keyword.value, source)
    try:
        return _SPECS[name](*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise SpecFileError(f"{source}: line {node.lineno}: {_short(str(e))}") from None


def _qp_name(node: ast.expr, namespaces) -> str:
    """``X`` of ``qp.X`` or ``qp.<namespace>.X``; "" for anything else."""
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id == "qp":
            return node.attr
        if isinstance(base, ast.Attribute) and base.attr in namespaces and \
                isinstance(base.value, ast.Name) and base.value.id == "qp":
            return node.attr
    return ""


def _literal(node: ast.expr, source: str):
    """A literal argument, or a dtype named ``qp.<dtype>`` (given as its name)."""
    dtype = _qp_name(node, ())
    if dtype in _DTYPE_NAMES:
        return as_dtype(dtype)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        _refuse(node, source, "a literal or qp.string/qp.int64/qp.float32")


def _from_json(text: str, source: str) -> Dict[str, Dict[str, Any]]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise SpecFileError(f"{source}: not valid JSON ({getattr(e, 'msg', 'too deep')} at "
                            f"line {getattr(e, 'lineno', '?')})") from None
    if not isinstance(data, dict):
        raise SpecFileError(f"{source}: the JSON must be an object")
    if not all(isinstance(v, dict) and all(isinstance(s, dict) for s in v.values())
               for v in data.values()):
        data = {"features": data}
    found: Dict[str, Dict[str, Any]] = {}
    for name, specs in data.items():
        found[name] = {}
        for key, fields in specs.items():
            if not isinstance(fields, dict) or fields.get("type") not in _SPECS:
                raise SpecFileError(f"{source}: {_short(name)}[{_short(key)!r}] needs a "
                                    f"\"type\" of {sorted(_SPECS)}")
            kwargs = {k: v for k, v in fields.items() if k != "type"}
            try:
                if isinstance(kwargs.get("dtype"), str):
                    kwargs["dtype"] = as_dtype(kwargs["dtype"])
                found[name][key] = _SPECS[fields["type"]](**kwargs)
            except (TypeError, ValueError) as e:
                raise SpecFileError(f"{source}: {_short(name)}[{_short(key)!r}]: "
                                    f"{_short(str(e))}") from None
    return found
