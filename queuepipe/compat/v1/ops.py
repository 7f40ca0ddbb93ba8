"""The per-element ops TF1 input code uses, on symbolic values, computed with NumPy.

Each function builds a :class:`~queuepipe.compat.v1.graph.Tensor` whose value is the NumPy
result of the same operation on its inputs' values. Arithmetic and comparison operators and
indexing are installed on Tensor here. The parsing and decoding ops run queuepipe's own
(``qp.io.parse_single_example``, ``decode_raw``, ``decode_csv``), which give TF's results.
"""

from __future__ import annotations

import builtins
import operator
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import parsing
from queuepipe.compat.v1.graph import Operation, Tensor, _Constant, as_node
from queuepipe.compat.v1.shapes import TensorShape
from queuepipe.errors import InvalidArgumentError
from queuepipe.sparse import SparseValue

__all__ = [
    "cast", "to_float", "to_double", "to_int32", "to_int64", "reshape", "stack", "concat",
    "expand_dims", "squeeze", "transpose", "slice", "gather", "one_hot", "argmax", "argmin",
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "string_to_number",
    "decode_raw", "decode_csv", "parse_single_example", "parse_example",
    "parse_single_sequence_example", "sparse_tensor_to_dense", "identity", "shape", "size",
    "constant", "convert_to_tensor", "add", "subtract", "multiply", "divide", "maximum",
    "minimum", "abs", "sqrt", "square", "exp", "log", "equal", "not_equal", "greater", "less",
    "group", "py_func", "numpy_function", "py_function", "strided_slice", "round", "floor",
    "logical_and", "logical_or", "logical_not", "zeros", "ones", "zeros_like", "ones_like",
    "fill", "range", "tile", "pad", "where", "clip_by_value", "parse_sequence_example",
]


def _op(name: str, fn: Any, *inputs: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """A node computing ``fn`` of its inputs' values. Its static shape and dtype are
    ``shape``/``dtype`` where given, else found by running ``fn`` on stand-ins (see
    :func:`_probe`): ``fn`` must be a pure function of its inputs."""
    nodes = [as_node(x) for x in inputs]
    if shape is None or dtype is None:
        found_shape, found_dtype = _probe(fn, nodes)
        shape = found_shape if shape is None else shape
        dtype = found_dtype if dtype is None else dtype
    return Tensor(fn, nodes, name=name, shape=shape, dtype=dtype)


_PROBE_ELEMENTS = 1 << 16  # stand-ins larger than this are not made: the shape stays unknown


def _probe(fn: Any, nodes: Sequence[Tensor]) -> Any:
    """The static shape and dtype of ``fn``'s result: ``fn`` run on stand-ins of each input
    (a constant's value; ones of a Tensor's shape and dtype), twice with each unknown
    dimension set to 2 and then 3, the dimensions that differ being unknown. ``(None, None)``
    when an input's shape or dtype is not known, or ``fn`` refuses the stand-ins."""
    results = []
    for size in (2, 3):
        args = []
        for node in nodes:
            if isinstance(node, _Constant):
                if np.size(node._constant) > _PROBE_ELEMENTS:
                    return None, None
                args.append(node._constant)
                continue
            if node._shape is None or node._shape.ndims is None or node._dtype is None:
                return None, None
            dims = [size if d is None else d for d in node._shape.as_list()]
            if int(np.prod(dims)) > _PROBE_ELEMENTS:
                return None, None
            args.append(np.full(dims, b"" if node._dtype == _dtypes.string else 1,
                                dtype=node._dtype))
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fn(*args)
        except Exception:  # noqa: BLE001 - a stand-in it refuses: the shape stays unknown
            return None, None
        if isinstance(out, (SparseValue, tuple, list, dict)):
            return None, None
        results.append(np.asarray(out))
    first, second = results
    if first.ndim != second.ndim:
        return TensorShape(None), first.dtype
    return TensorShape([a if a == b else None for a, b in zip(first.shape, second.shape)]), \
        first.dtype


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
    node = as_node(x)
    return _op(name or "Cast", lambda v: _cast(v, target), node, shape=node._shape,
               dtype=target)


def to_float(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.float32, name or "ToFloat")


def to_double(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.float64, name or "ToDouble")


def to_int32(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.int32, name or "ToInt32")


def to_int64(x: Any, name: Optional[str] = None) -> Tensor:
    return cast(x, _dtypes.int64, name or "ToInt64")


def reshape(tensor: Any, shape: Any, name: Optional[str] = None) -> Tensor:
    """``tf.reshape``: the static shape is ``shape`` where it is a constant (its ``-1`` known
    when the input's size is)."""
    node = as_node(tensor)
    static = None
    fn: Callable[[Any, Any], Any] = _reshaped
    if isinstance(as_node(shape), _Constant):
        dims = [int(d) for d in np.asarray(shape).reshape(-1).tolist()]
        known = node._shape.num_elements() if node._shape is not None else None
        rest = int(np.prod([d for d in dims if d != -1]))
        static = [(known // rest if known is not None and rest else None) if d == -1 else d
                  for d in dims]
        # a constant shape made into a tuple once, not per run: this runs once per record
        # in a per-record input graph
        target = tuple(dims)

        def constant(value: Any, _: Any) -> Any:
            return value.reshape(target) if type(value) is np.ndarray \
                else np.reshape(value, target)

        fn = constant
    return _op(name or "Reshape", fn, node, shape, shape=static, dtype=node._dtype)


def _reshaped(value: Any, shape: Any) -> Any:
    """``value`` in ``shape`` (a tensor's value: a list or array of ints)."""
    return np.reshape(value, tuple(np.asarray(shape).tolist()))


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


def strided_slice(input_: Any, begin: Sequence[int], end: Sequence[int],
                  strides: Optional[Sequence[int]] = None, begin_mask: int = 0,
                  end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0, var: Any = None,
                  name: Optional[str] = None) -> Tensor:
    """``tf.strided_slice`` with constant bounds; bit ``i`` of ``begin_mask``/``end_mask``
    leaves dimension ``i``'s bound open, of ``shrink_axis_mask`` takes index ``begin[i]``."""
    if ellipsis_mask or new_axis_mask:
        raise NotImplementedError("tf.strided_slice: ellipsis_mask and new_axis_mask are not "
                                  "provided by queuepipe.compat.v1; index with tensor[...] "
                                  "and tf.expand_dims")
    steps = list(strides) if strides is not None else [1] * len(begin)
    index: List[Any] = []
    for i, (b, e, step) in enumerate(zip(begin, end, steps)):
        if shrink_axis_mask >> i & 1:
            index.append(int(b))
            continue
        index.append(builtins.slice(None if begin_mask >> i & 1 else int(b),
                                    None if end_mask >> i & 1 else int(e), int(step)))
    key = tuple(index)
    return _op(name or "StridedSlice", lambda v: np.asarray(v)[key], input_)


def _getitem(self: Tensor, key: Any) -> Tensor:
    """``tensor[key]``: NumPy's indexing of the value (TF's strided slice); an index that is
    a Tensor is read in the same run."""
    if isinstance(key, Tensor):
        return _op("strided_slice", lambda v, k: np.asarray(v)[k], self, key)
    return _op("strided_slice", lambda v: np.asarray(v)[key] if not isinstance(v, (
        tuple, list, dict)) else v[key], self)


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
        node = as_node(input_tensor)
        if node._dtype == _dtypes.bool and fn is not np.max and fn is not np.min:
            raise TypeError(f"Value passed to parameter 'input' of {reduce.__name__} has "
                            "DataType bool, which it does not reduce (cast it first)")
        return _op(name or reduce.__name__, lambda v: _keep_dtype(fn, v, ax, keep), node)
    reduce.__name__ = name
    return reduce


def _keep_dtype(fn: Any, value: Any, axis: Any, keepdims: bool) -> Any:
    """A reduction in the input's dtype, as TF computes it: integer sums wrap, an integer
    mean is the sum divided by the count, truncated toward zero."""
    value = np.asarray(value)
    if fn is np.mean and value.dtype.kind in "iu":
        total = np.asarray(np.sum(value, axis=axis, keepdims=keepdims, dtype=value.dtype))
        count = max(value.size // total.size, 1) if total.size else 1
        wide = total.astype(np.int64)
        out = (np.abs(wide) // count * np.sign(wide)).astype(value.dtype)
    elif fn in (np.sum, np.mean, np.prod):
        out = np.asarray(fn(value, axis=axis, keepdims=keepdims, dtype=value.dtype))
    else:
        out = np.asarray(fn(value, axis=axis, keepdims=keepdims))
    return out[()] if out.ndim == 0 else out


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
    """``tf.decode_raw``: the input's shape and one more dimension, unknown until run."""
    node = as_node(input_bytes)
    shape = node._shape.concatenate([None]) if node._shape is not None else None
    return _op(name or "DecodeRaw",
               lambda v: parsing.decode_raw(v, out_type, little_endian=little_endian),
               node, shape=shape, dtype=out_type)


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",",
               use_quote_delim: bool = True, name: Optional[str] = None, na_value: str = "",
               select_cols: Optional[Sequence[int]] = None) -> List[Tensor]:
    """``tf.decode_csv``: one Tensor per column, from one parse of the record."""
    node = as_node(records)
    columns = Tensor(lambda v: parsing.decode_csv(
        v, record_defaults, field_delim=field_delim, use_quote_delim=use_quote_delim,
        na_value=na_value, select_cols=select_cols), [node], name=name or "DecodeCSV")
    count = len(select_cols) if select_cols is not None else len(record_defaults)
    return [columns.output(i, shape=node._shape, dtype=_default_dtype(record_defaults[i]))
            for i in builtins.range(count)]


def _default_dtype(default: Any) -> Any:
    if isinstance(default, (np.dtype, type)):
        return default
    values = np.asarray(default)
    if values.size == 0 or values.dtype.kind in "SUO":
        return None if values.size == 0 else _dtypes.string
    return {"i": _dtypes.int32, "f": _dtypes.float32}.get(values.dtype.kind, values.dtype)


def _feature_outputs(parsed: Tensor, features: Mapping[str, Any],
                     batch: Sequence[Optional[int]]) -> Dict[str, Tensor]:
    """One Tensor per feature, with the spec's shape (after ``batch``'s dimensions) and
    dtype; a VarLenFeature's SparseValue has no static shape here."""
    out = {}
    for key, spec in features.items():
        shape = None
        if isinstance(spec, parsing.FixedLenFeature):
            shape = list(batch) + list(np.atleast_1d(spec.shape).tolist()
                                       if np.ndim(spec.shape) else [spec.shape]
                                       if not isinstance(spec.shape, (list, tuple))
                                       else spec.shape)
        elif isinstance(spec, parsing.FixedLenSequenceFeature):
            shape = list(batch) + [None] + list(spec.shape)
        out[key] = parsed.output(key, shape=shape, dtype=spec.dtype)
    return out


def parse_single_example(serialized: Any, features: Mapping[str, Any],
                         name: Optional[str] = None,
                         example_names: Any = None) -> Dict[str, Tensor]:
    parsed = Tensor(lambda v: parsing.parse_single_example(v, features), [serialized],
                    name=name or "ParseSingleExample")
    return _feature_outputs(parsed, features, [])


def parse_example(serialized: Any, features: Mapping[str, Any], name: Optional[str] = None,
                  example_names: Any = None) -> Dict[str, Tensor]:
    node = as_node(serialized)
    rows = node._shape.as_list() if node._shape is not None and node._shape.ndims else [None]
    parsed = Tensor(lambda v: parsing.parse_example(v, features), [node],
                    name=name or "ParseExample")
    return _feature_outputs(parsed, features, rows[:1])


def parse_single_sequence_example(serialized: Any, context_features: Any = None,
                                  sequence_features: Any = None, example_name: Any = None,
                                  name: Optional[str] = None) -> Any:
    parsed = Tensor(lambda v: parsing.parse_single_sequence_example(
        v, context_features, sequence_features), [serialized],
        name=name or "ParseSingleSequenceExample")
    return (_feature_outputs(parsed.output(0), context_features or {}, []),
            _feature_outputs(parsed.output(1), sequence_features or {}, []))


def parse_sequence_example(serialized: Any, context_features: Any = None,
                           sequence_features: Any = None, example_names: Any = None,
                           name: Optional[str] = None) -> Any:
    node = as_node(serialized)
    rows = node._shape.as_list() if node._shape is not None and node._shape.ndims else [None]
    parsed = Tensor(lambda v: parsing.parse_sequence_example(
        v, context_features, sequence_features, example_names), [node],
        name=name or "ParseSequenceExample")
    lengths = parsed.output(2)
    return (_feature_outputs(parsed.output(0), context_features or {}, rows[:1]),
            _feature_outputs(parsed.output(1), sequence_features or {}, rows[:1]),
            {key: lengths.output(key, shape=rows[:1], dtype=np.int64)
             for key, spec in (sequence_features or {}).items()
             if isinstance(spec, parsing.FixedLenSequenceFeature)})


def sparse_tensor_to_dense(sp_input: Any, default_value: Any = 0,
                           validate_indices: bool = True, name: Optional[str] = None) -> Tensor:
    """``tf.sparse.to_dense``: the dense value of a SparseValue (its dtype, its dense shape)."""
    node = as_node(sp_input)
    return Tensor(lambda v: v.to_dense(default_value), [node], name=name or "SparseToDense",
                  dtype=node._dtype)


def py_func(func: Callable[..., Any], inp: Sequence[Any], Tout: Any,  # noqa: N803 - TF's name
            stateful: bool = True, name: Optional[str] = None) -> Any:
    """``tf.py_func`` / ``tf.numpy_function``: ``func`` called with the inputs' NumPy values
    where the graph is evaluated (in the runner threads, for a batched element). Its results
    are converted to ``Tout`` (a list of dtypes gives a list of Tensors); an exception it
    raises, or a result of another dtype than ``Tout`` asks, reaches ``sess.run`` as an
    ``InvalidArgumentError`` chained to the cause, as TF reports it. Shapes are unknown."""
    many = isinstance(Tout, (list, tuple))
    types = [_dtype(t) for t in (Tout if many else [Tout])]
    label = name or "PyFunc"

    def call(*values: Any) -> Any:
        try:
            result = func(*values)
        except Exception as e:  # noqa: BLE001 - carried to sess.run, as TF carries it
            raise InvalidArgumentError(f"{label}: {type(e).__name__}: {e}") from e
        results = list(result) if many else [result]
        if len(results) != len(types):
            raise InvalidArgumentError(f"{label}: the function returned {len(results)} values, "
                                       f"Tout names {len(types)}")
        return [_py_func_result(label, value, dtype) for value, dtype in zip(results, types)]

    node = Tensor(call, list(inp), name=label)
    outputs = [node.output(i, shape=TensorShape(None), dtype=t) for i, t in enumerate(types)]
    return outputs if many else outputs[0]


def _py_func_result(label: str, value: Any, dtype: np.dtype) -> Any:
    """TF's conversion of a py_func result: bytes/str to string, a float to a narrower float;
    an integer where another integer type is asked is an error, as in TF."""
    if dtype == _dtypes.string:
        out = np.asarray(value, dtype=object)
        out = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s,
                           otypes=[object])(out) if out.size else out
    else:
        array = np.asarray(value)
        if array.dtype != dtype and not (array.dtype.kind == "f" and dtype.kind == "f"):
            raise InvalidArgumentError(
                f"{label}: the function returned {array.dtype.name} where Tout asks "
                f"{dtype.name}")
        out = array.astype(dtype)
    return out[()] if out.ndim == 0 else out


numpy_function = py_func


class _EagerValue(np.ndarray):
    """What ``tf.py_function``'s function is given: the value, with EagerTensor's ``numpy()``
    (bytes for a string scalar, a NumPy scalar for a number)."""

    def numpy(self) -> Any:
        value = self.view(np.ndarray)
        return value[()] if value.ndim == 0 else value


def py_function(func: Callable[..., Any], inp: Sequence[Any], Tout: Any,  # noqa: N803
                name: Optional[str] = None) -> Any:
    """``tf.py_function``: as :func:`py_func`, each input given with a ``numpy()`` method
    as TF's EagerTensors have."""
    def eager(*values: Any) -> Any:
        return func(*(np.asarray(v, dtype=object if isinstance(v, bytes) else None)
                      .view(_EagerValue) for v in values))
    return py_func(eager, inp, Tout, name=name or "EagerPyFunc")


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
    """``tf.constant`` as TF makes it: Python ints int32 (int64 where they do not fit),
    floats float32, strings an object array of ``bytes`` keeping every byte (a scalar stays
    ``bytes``), as ``sess.run`` gives them in TF."""
    out = constant_value(value, None if dtype is None else _dtype(dtype))
    if shape is not None:
        out = _fill(out, [int(d) for d in np.atleast_1d(shape)] if np.ndim(shape) else [])
    return as_node(out[()] if out.ndim == 0 and out.dtype == _dtypes.string else out)


def _fill(values: np.ndarray, shape: List[int]) -> np.ndarray:
    """TF's ``constant(value, shape=...)``: the values in order, the last one repeated to fill
    the rest; more values than the shape holds is an error, as in TF."""
    size = int(np.prod(shape))
    flat = values.reshape(-1)
    if flat.size > size:
        raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got {values.shape}: "
                        f"{flat.size} values do not fit in {size}")
    if flat.size == 0:
        raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got an empty value")
    return np.concatenate([flat, np.repeat(flat[-1:], size - flat.size)]).reshape(shape)


def constant_value(value: Any, dtype: Optional[np.dtype]) -> np.ndarray:
    """``value`` as the array TF makes of it (``dtype``, else TF's inferred dtype)."""
    if isinstance(value, np.ndarray) and dtype is None:
        return value.astype(object) if value.dtype.kind in "SU" else value
    inferred = np.asarray(value, dtype=object if _has_strings(value) else None)
    if inferred.dtype == object or dtype == _dtypes.string:
        flat = [v.encode() if isinstance(v, str) else v for v in inferred.reshape(-1).tolist()]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(inferred.shape)
    if dtype is not None:
        return inferred.astype(dtype)
    if inferred.dtype.kind == "i" and not isinstance(value, (np.ndarray, np.generic)):
        fits = inferred.size == 0 or (inferred.min() >= -2**31 and inferred.max() < 2**31)
        return inferred.astype(np.int32 if fits else np.int64)
    if inferred.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        return inferred.astype(np.float32)
    return inferred


def convert_to_tensor(value: Any, dtype: Any = None, name: Optional[str] = None) -> Any:
    return value if isinstance(value, Tensor) else constant(value, dtype)


def _has_strings(value: Any) -> bool:
    if isinstance(value, (bytes, str)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_strings(v) for v in value)
    return False


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
round, floor = _unary("Round", np.round), _unary("Floor", np.floor)  # noqa: A001 - TF's names
logical_and, logical_or = _binary("LogicalAnd", np.logical_and), \
    _binary("LogicalOr", np.logical_or)
logical_not = _unary("LogicalNot", np.logical_not)


def zeros(shape: Any, dtype: Any = _dtypes.float32, name: Optional[str] = None) -> Tensor:
    target = _dtype(dtype)
    return _op(name or "zeros", lambda s: np.zeros(tuple(np.asarray(s).tolist()), target), shape)


def ones(shape: Any, dtype: Any = _dtypes.float32, name: Optional[str] = None) -> Tensor:
    target = _dtype(dtype)
    return _op(name or "ones", lambda s: np.ones(tuple(np.asarray(s).tolist()), target), shape)


def zeros_like(tensor: Any, dtype: Any = None, name: Optional[str] = None) -> Tensor:
    return _op(name or "zeros_like", lambda v: np.zeros_like(
        np.asarray(v), dtype=None if dtype is None else _dtype(dtype)), tensor)


def ones_like(tensor: Any, dtype: Any = None, name: Optional[str] = None) -> Tensor:
    return _op(name or "ones_like", lambda v: np.ones_like(
        np.asarray(v), dtype=None if dtype is None else _dtype(dtype)), tensor)


def fill(dims: Any, value: Any, name: Optional[str] = None) -> Tensor:
    """``tf.fill``: ``value``'s dtype as TF makes it (a Python int is int32)."""
    return _op(name or "Fill", lambda d, v: np.full(tuple(np.asarray(d).tolist()), v),
               dims, constant_value(value, None) if not isinstance(value, Tensor) else value)


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,  # noqa: A001
          name: str = "range") -> Tensor:
    """``tf.range``: int32 for Python ints, float32 for floats, unless ``dtype`` says."""
    bounds = [0, start, delta] if limit is None else [start, limit, delta]
    target = _dtype(dtype) if dtype is not None else constant_value(
        [np.asarray(evaluate_constant(b)).item() for b in bounds], None).dtype
    return _op(name, lambda *b: np.arange(*b, dtype=target), *bounds)


def evaluate_constant(value: Any) -> Any:
    """A build-time value: a constant Tensor's, or ``value`` itself."""
    return value._constant if isinstance(value, _Constant) else value


def tile(input: Any, multiples: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return _op(name or "Tile", lambda v, m: np.tile(v, tuple(np.asarray(m).tolist())),
               input, multiples)


def pad(tensor: Any, paddings: Any, mode: str = "CONSTANT", name: Optional[str] = None,
        constant_values: Any = 0) -> Tensor:
    """``tf.pad``: ``CONSTANT``, ``REFLECT`` or ``SYMMETRIC``, as NumPy's modes of those
    names compute them."""
    modes = {"CONSTANT": {"mode": "constant", "constant_values": constant_values},
             "REFLECT": {"mode": "reflect"}, "SYMMETRIC": {"mode": "symmetric"}}
    if mode.upper() not in modes:
        raise ValueError(f"tf.pad: mode must be one of {sorted(modes)}, got {mode!r}")
    arguments: Dict[str, Any] = modes[mode.upper()]

    def padded(v: Any, p: Any) -> np.ndarray:
        return np.pad(v, [tuple(row) for row in np.asarray(p).tolist()], **arguments)
    return _op(name or "Pad", padded, tensor, paddings)


def where(condition: Any, x: Any = None, y: Any = None, name: Optional[str] = None) -> Tensor:
    """``tf.where``: ``x`` where ``condition`` holds, else ``y``; without them, the int64
    coordinates of the true elements, one row each."""
    if x is None and y is None:
        return _op(name or "Where", lambda c: np.argwhere(c).astype(np.int64), condition)
    return _op(name or "Select", lambda c, a, b: np.where(c, a, b), condition, x, y)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any,
                  name: Optional[str] = None) -> Tensor:
    return _op(name or "clip_by_value", lambda v, lo, hi: np.clip(v, lo, hi).astype(
        np.asarray(v).dtype), t, clip_value_min, clip_value_max)


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
    setattr(Tensor, "__getitem__", _getitem)


_install_operators()
