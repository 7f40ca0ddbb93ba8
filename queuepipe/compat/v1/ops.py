"""The per-element ops TF1 input code uses, on symbolic values, computed with NumPy.

Each function builds a :class:`~queuepipe.compat.v1.graph.Tensor` whose value is the NumPy
result of the same operation on its inputs' values. Arithmetic and comparison operators and
indexing are installed on Tensor here. The parsing and decoding ops run queuepipe's own
(``qp.io.parse_single_example``, ``decode_raw``, ``decode_csv``), which give TF's results.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import parsing
from queuepipe.compat.v1.graph import Operation, Tensor, as_node
from queuepipe.sparse import SparseValue

__all__ = [
    "cast", "to_float", "to_double", "to_int32", "to_int64", "reshape", "stack", "concat",
    "expand_dims", "squeeze", "transpose", "slice", "gather", "one_hot", "argmax", "argmin",
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "string_to_number",
    "decode_raw", "decode_csv", "parse_single_example", "parse_example",
    "parse_single_sequence_example", "sparse_tensor_to_dense", "identity", "shape", "size",
    "constant", "convert_to_tensor", "add", "subtract", "multiply", "divide", "maximum",
    "minimum", "abs", "sqrt", "square", "exp", "log", "equal", "not_equal", "greater", "less",
    "group",
    "parse_sequence_example",
]


def _op(name: str, fn: Any, *inputs: Any) -> Tensor:
    return Tensor(fn, inputs, name=name)


def _dtype(dtype: Any) -> np.dtype:
    return _dtypes.as_dtype(dtype)


def _cast(value: Any, dtype: np.dtype) -> Any:
    if isinstance(value, SparseValue):
        return value._replace(values=np.asarray(value.values).astype(dtype))
    result = np.asarray(value).astype(dtype)
    return result[()] if result.ndim == 0 else result


def cast(x: Any, dtype: Any, name: Optional[str] = None) -> Tensor:
    """``tf.cast``: float to int truncates toward zero, as in TF."""
    target = _dtype(dtype)
    return _op(name or "Cast", lambda v: _cast(v, target), x)


def to_float(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.float32, name or "ToFloat")


def to_double(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.float64, name or "ToDouble")


def to_int32(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.int32, name or "ToInt32")


def to_int64(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.int64, name or "ToInt64")


def reshape(tensor: Any, shape: Any, name: Optional[str] = None) -> Tensor:
    return _op(name or "Reshape", lambda v, s: np.reshape(v, tuple(np.asarray(s).tolist())),
               tensor, shape)


def _list_op(name: str, fn: Any, values: Sequence[Any]) -> Tensor:
    return Tensor(lambda *vs: fn([np.asarray(v) for v in vs]), list(values), name=name)


def stack(values: Sequence[Any], axis: int = 0, name: Optional[str] = None) -> Tensor:
    return _list_op(name or "stack", lambda vs: np.stack(vs, axis=axis), values)


def concat(values: Sequence[Any], axis: int, name: Optional[str] = None) -> Tensor:
    return _list_op(name or "concat", lambda vs: np.concatenate(vs, axis=axis), values)


def expand_dims(input: Any, axis: int, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return _op(name or "ExpandDims", lambda v: np.expand_dims(v, axis), input)


def squeeze(input: Any, axis: Any = None, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return _op(name or "Squeeze",
               lambda v: np.squeeze(v, axis=None if axis is None else tuple(np.atleast_1d(axis))),
               input)


def transpose(a: Any, perm: Any = None, name: Optional[str] = None) -> Tensor:
    return _op(name or "transpose", lambda v: np.transpose(v, perm), a)


def slice(input_: Any, begin: Any, size: Any, name: Optional[str] = None) -> Tensor:  # noqa: A001
    """``tf.slice``: ``size[i] == -1`` takes the rest of dimension ``i``."""
    def take(v: Any, b: Any, s: Any) -> np.ndarray:
        v = np.asarray(v)
        index = tuple(builtins.slice(int(start), None if int(n) == -1 else int(start) + int(n))
                      for start, n in zip(np.asarray(b).tolist(), np.asarray(s).tolist()))
        return v[index]
    return _op(name or "Slice", take, input_, begin, size)


def gather(params: Any, indices: Any, axis: int = 0, name: Optional[str] = None) -> Tensor:
    return _op(name or "GatherV2", lambda p, i: np.take(p, i, axis=axis), params, indices)


def one_hot(indices: Any, depth: int, on_value: Any = 1.0, off_value: Any = 0.0,
            axis: int = -1, dtype: Any = None, name: Optional[str] = None) -> Tensor:
    """``tf.one_hot``: float32 unless ``dtype`` says; an index outside ``[0, depth)`` gives a
    row of ``off_value``, as in TF."""
    out_dtype = _dtype(dtype) if dtype is not None else np.dtype(np.float32)

    def encode(i: Any) -> np.ndarray:
        i = np.asarray(i)
        hot = np.asarray(i)[..., None] == np.arange(depth)
        out = np.where(hot, on_value, off_value).astype(out_dtype)
        return np.moveaxis(out, -1, axis) if axis != -1 else out
    return _op(name or "one_hot", encode, indices)


def _reduce(name: str, fn: Any) -> Any:
    def reduce(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None, keep_dims: Optional[bool] = None) -> Tensor:
        keep = keepdims if keep_dims is None else keep_dims
        ax = None if axis is None else tuple(np.atleast_1d(axis).tolist())
        return _op(name or reduce.__name__, lambda v: fn(np.asarray(v), axis=ax, keepdims=keep),
                   input_tensor)
    reduce.__name__ = name
    return reduce


reduce_sum = _reduce("Sum", np.sum)
reduce_mean = _reduce("Mean", np.mean)
reduce_max = _reduce("Max", np.max)
reduce_min = _reduce("Min", np.min)
reduce_prod = _reduce("Prod", np.prod)


def argmax(input: Any, axis: Optional[int] = None, name: Optional[str] = None,  # noqa: A002
           output_type: Any = _dtypes.int64) -> Tensor:
    return _op(name or "ArgMax",
               lambda v: np.argmax(v, axis=0 if axis is None else axis).astype(output_type),
               input)


def argmin(input: Any, axis: Optional[int] = None, name: Optional[str] = None,  # noqa: A002
           output_type: Any = _dtypes.int64) -> Tensor:
    return _op(name or "ArgMin",
               lambda v: np.argmin(v, axis=0 if axis is None else axis).astype(output_type),
               input)


def string_to_number(string_tensor: Any, out_type: Any = _dtypes.float32,
                     name: Optional[str] = None) -> Tensor:
    target = _dtype(out_type)

    def convert(v: Any) -> Any:
        flat = [target.type(s.decode() if isinstance(s, bytes) else s)
                for s in np.asarray(v, dtype=object).reshape(-1)]
        out = np.array(flat, dtype=target).reshape(np.shape(v))
        return out[()] if out.ndim == 0 else out
    return _op(name or "StringToNumber", convert, string_tensor)


def decode_raw(input_bytes: Any, out_type: Any, little_endian: bool = True,
               name: Optional[str] = None) -> Tensor:
    return _op(name or "DecodeRaw",
               lambda v: parsing.decode_raw(v, out_type, little_endian=little_endian),
               input_bytes)


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",",
               use_quote_delim: bool = True, name: Optional[str] = None, na_value: str = "",
               select_cols: Optional[Sequence[int]] = None) -> List[Tensor]:
    """``tf.decode_csv``: one Tensor per column, from one parse of the record."""
    columns = _op(name or "DecodeCSV", lambda v: parsing.decode_csv(
        v, record_defaults, field_delim=field_delim, use_quote_delim=use_quote_delim,
        na_value=na_value, select_cols=select_cols), records)
    count = len(select_cols) if select_cols is not None else len(record_defaults)
    return [columns[i] for i in range(count)]


def _outputs(parsed: Tensor, keys: Sequence[str]) -> Dict[str, Tensor]:
    return {key: parsed[key] for key in keys}


def parse_single_example(serialized: Any, features: Mapping[str, Any],
                         name: Optional[str] = None,
                         example_names: Any = None) -> Dict[str, Tensor]:
    parsed = _op(name or "ParseSingleExample",
                 lambda v: parsing.parse_single_example(v, features), serialized)
    return _outputs(parsed, list(features))


def parse_example(serialized: Any, features: Mapping[str, Any], name: Optional[str] = None,
                  example_names: Any = None) -> Dict[str, Tensor]:
    parsed = _op(name or "ParseExample", lambda v: parsing.parse_example(v, features),
                 serialized)
    return _outputs(parsed, list(features))


def _sequence_parse(name: str, parse: Any, serialized: Any, context_features: Any,
                    sequence_features: Any) -> Any:
    """A SequenceExample parse as an op: ``(context, feature lists, the op)``, the first two
    dicts of its outputs, as TF returns them."""
    parsed = _op(name, lambda v: parse(v, context_features, sequence_features), serialized)
    return (_outputs(parsed[0], list(context_features or {})),
            _outputs(parsed[1], list(sequence_features or {})), parsed)


def parse_single_sequence_example(serialized: Any, context_features: Any = None,
                                  sequence_features: Any = None, example_name: Any = None,
                                  name: Optional[str] = None) -> Any:
    context, lists, _ = _sequence_parse(name or "ParseSingleSequenceExample",
                                        parsing.parse_single_sequence_example, serialized,
                                        context_features, sequence_features)
    return context, lists


def parse_sequence_example(serialized: Any, context_features: Any = None,
                           sequence_features: Any = None, example_names: Any = None,
                           name: Optional[str] = None) -> Any:
    context, lists, parsed = _sequence_parse(name or "ParseSequenceExample",
                                             parsing.parse_sequence_example, serialized,
                                             context_features, sequence_features)
    lengths = [key for key, spec in (sequence_features or {}).items()
               if isinstance(spec, parsing.FixedLenSequenceFeature)]
    return context, lists, _outputs(parsed[2], lengths)


def sparse_tensor_to_dense(sp_input: Any, default_value: Any = 0,
                           validate_indices: bool = True, name: Optional[str] = None) -> Tensor:
    return _op(name or "SparseToDense", lambda v: v.to_dense(default_value), sp_input)


def group(*inputs: Any, name: Optional[str] = None) -> Operation:
    """``tf.group``: one operation that runs every input (in one evaluation)."""
    return Operation(lambda *values: None, inputs, name=name or "group_deps")


def identity(input: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return _op(name or "Identity", lambda v: v, input)


def shape(input: Any, name: Optional[str] = None, out_type: Any = _dtypes.int32) -> Tensor:  # noqa: A002
    return _op(name or "Shape", lambda v: np.array(np.shape(v), dtype=_dtype(out_type)), input)


def size(input: Any, name: Optional[str] = None, out_type: Any = _dtypes.int32) -> Tensor:  # noqa: A002
    return _op(name or "Size", lambda v: _dtype(out_type).type(np.size(v)), input)


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const") -> Any:
    """``tf.constant``: a NumPy array (a ``bytes`` scalar stays ``bytes``, as TF's string
    scalars come out of ``sess.run``)."""
    if isinstance(value, bytes) and dtype is None and shape is None:
        return as_node(value)
    out = np.asarray(value, dtype=None if dtype is None else _dtype(dtype))
    if shape is not None:
        out = np.broadcast_to(out, tuple(shape)).copy()
    return as_node(out)


def convert_to_tensor(value: Any, dtype: Any = None, name: Optional[str] = None) -> Any:
    return value if isinstance(value, Tensor) else constant(value, dtype)


def _binary(name: str, fn: Any) -> Any:
    def op(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
        return _op(name or op.__name__, fn, x, y)
    op.__name__ = name
    return op


def _unary(name: str, fn: Any) -> Any:
    def op(x: Any, name: Optional[str] = None) -> Tensor:
        return _op(name or op.__name__, fn, x)
    op.__name__ = name
    return op


add, subtract, multiply = _binary("Add", np.add), _binary("Sub", np.subtract), \
    _binary("Mul", np.multiply)
divide, maximum, minimum = _binary("RealDiv", np.true_divide), _binary("Maximum", np.maximum), \
    _binary("Minimum", np.minimum)
equal, not_equal = _binary("Equal", np.equal), _binary("NotEqual", np.not_equal)
greater, less = _binary("Greater", np.greater), _binary("Less", np.less)
abs, sqrt, square = _unary("Abs", np.abs), _unary("Sqrt", np.sqrt), _unary("Square", np.square)  # noqa: A001
exp, log = _unary("Exp", np.exp), _unary("Log", np.log)


def _install_operators() -> None:
    """Gives Tensor TF's operators: each builds the NumPy operation on the values."""
    binary = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
              "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
              "pow": operator.pow, "and": operator.and_, "or": operator.or_,
              "xor": operator.xor, "matmul": operator.matmul}
    for method, fn in binary.items():
        setattr(Tensor, f"__{method}__",
                lambda self, other, fn=fn, m=method: _op(m, fn, self, other))
        setattr(Tensor, f"__r{method}__",
                lambda self, other, fn=fn, m=method: _op(m, fn, other, self))
    for method, fn in {"lt": operator.lt, "le": operator.le, "gt": operator.gt,
                       "ge": operator.ge}.items():
        setattr(Tensor, f"__{method}__",
                lambda self, other, fn=fn, m=method: _op(m, fn, self, other))
    unary: Dict[str, Callable[[Any], Any]] = {"neg": operator.neg, "abs": np.abs,
                                              "invert": operator.invert}
    for method, one in unary.items():
        setattr(Tensor, f"__{method}__", lambda self, fn=one, m=method: _op(m, fn, self))


_install_operators()
