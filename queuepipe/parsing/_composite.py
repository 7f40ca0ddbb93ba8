"""SparseFeature, as TF's ``parsing_config`` builds it: its index and value keys are parsed as
VarLenFeatures (shared with any VarLenFeature of the same key in the spec), then merged
into one :class:`SparseValue` per SparseFeature, and the helper outputs left out."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing._specs import SparseFeature, VarLenFeature, _spec_dtype
from queuepipe.sparse import SparseValue


def expand(features: Mapping[str, Any]) -> Tuple[Mapping[str, Any], bool]:
    """``(spec, composite)``: ``features`` with each SparseFeature replaced by VarLenFeatures
    of its keys (index keys int64), and whether there was one.

    Raises:
      ValueError: a key is wanted with two types, or both as a VarLenFeature (a SparseFeature's
        key) and as a dense feature; TF's words.
    """
    if not isinstance(features, Mapping) or \
            not any(isinstance(spec, SparseFeature) for spec in features.values()):
        return features, False  # (not a Mapping: the caller says so)
    plain = {key: spec for key, spec in features.items()
             if not isinstance(spec, SparseFeature)}
    for spec in features.values():
        if isinstance(spec, SparseFeature):
            for key in sorted(spec.index_keys):
                _add_sparse_key(plain, key, _dtypes.int64)
            _add_sparse_key(plain, spec.value_key, _spec_dtype(spec.dtype, "SparseFeature"))
    return plain, True


def _add_sparse_key(plain, key, dtype):
    present = plain.get(key)
    if present is None:
        plain[key] = VarLenFeature(dtype)
    elif not isinstance(present, VarLenFeature):
        raise ValueError(f"Dense and sparse keys must not intersect: feature {key!r} is a "
                         f"{type(present).__name__} and a SparseFeature's key")
    elif _spec_dtype(present.dtype, "VarLenFeature") != dtype:
        raise ValueError(f"Conflicting type {_dtypes.as_dtype(dtype).name} vs "
                         f"{_spec_dtype(present.dtype, 'VarLenFeature').name} for feature "
                         f"{key}.")


def merge(outputs: Dict[str, Any], features: Mapping[str, Any]) -> Dict[str, Any]:
    """The outputs of ``features`` (in its order) from the parsed ``outputs`` of its
    :func:`expand`-ed spec: each SparseFeature built, the helper outputs left out."""
    return {key: _sparse(key, spec, outputs) if isinstance(spec, SparseFeature)
            else outputs[key] for key, spec in features.items()}


def _sparse(key, spec, outputs):
    """TF's ``sparse_merge``: the rows of the first index feature, each index feature's values
    as one more index column, the value feature's values; sorted unless ``already_sorted``."""
    ids = [outputs[index_key] for index_key in spec.index_keys]
    values = outputs[spec.value_key].values
    for index_key, found in zip(spec.index_keys, ids):
        if len(found.values) != len(values):
            raise InvalidArgumentError(
                f"SparseFeature {key!r}: Dimensions {len(found.values)} and {len(values)} are "
                f"not compatible: {len(found.values)} indices in {index_key!r} but "
                f"{len(values)} values in {spec.value_key!r}")
    indices = np.concatenate([ids[0].indices[:, :-1]]
                             + [found.values.astype(np.int64)[:, None] for found in ids], axis=1)
    dense_shape = np.concatenate([ids[0].dense_shape[:-1],
                                  np.array(spec.sizes, dtype=np.int64)])
    if not spec.already_sorted and len(indices):
        order = np.lexsort(indices.T[::-1])  # row-major, stable for equal indices
        indices, values = indices[order], values[order]
    return SparseValue(indices, values, dense_shape)
