"""The bulk Example parser: records that share one layout are decoded together with NumPy
(:mod:`queuepipe.protos._layout`), ragged ones by one vectorized walk
(:mod:`queuepipe.protos._ragged`); whatever they leave goes to :mod:`._record`."""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

from queuepipe.parsing._specs import _FIXED, _LIST_TAG, _MAX_CACHED, _SEQ
from queuepipe.protos import _layout, _ragged


# Groups smaller than this are parsed record by record: walking a template costs more.
_MIN_GROUP = 4
# In a batch of mixed lengths, a length group goes by its template when it holds at least
# this fraction (1/n) of the batch; smaller groups join the ragged walk.
_MIN_GROUP_SHARE = 8
# How many templates to walk within one group of equal-length records.
_MAX_TEMPLATES = 3
# (requested keys, record length) -> the Layout that last served; a batch tries it first.
_LAYOUTS: Dict[Tuple[Tuple[str, ...], int], _layout.Layout] = {}


def _parse_fast(records, features, sinks):
    """Parses every record it can in bulk; returns the indices left for the parser.

    Records of one length go by layout groups (a template each, whose byte positions the
    group's records share): the fast path for fixed-length data. The rest, and every record
    of a length shared by few (ragged data: token lists), go through one vectorized walk,
    :func:`_parse_ragged`. A group's values are written only when its template parses
    cleanly with ``features`` (present with the right list and count, or absent with a
    default); the records of a template that does not are left to :func:`_parse_record`,
    which raises TF's error for the first bad record in batch order.
    """
    lengths = np.fromiter(map(len, records), dtype=np.intp, count=len(records))
    keys = tuple(feature.key for feature in features)
    left = []
    uniform = len(lengths) and lengths.min() == lengths.max()
    # A length shared by fewer records is not worth a template walk: ragged records share
    # lengths by chance, and a template walk costs as much as parsing a record.
    if uniform:
        grouped = [lengths[0]] if len(records) >= _MIN_GROUP else []
        if not grouped:
            left.extend(range(len(records)))
    else:
        distinct, sizes = np.unique(lengths, return_counts=True)
        grouped = distinct[sizes >= max(_MIN_GROUP, len(records) // _MIN_GROUP_SHARE)].tolist()
        left.extend(np.flatnonzero(~np.isin(lengths, grouped)).tolist())
    for length in grouped:
        rows = np.arange(len(lengths)) if uniform else np.flatnonzero(lengths == length)
        group = records if uniform else list(map(records.__getitem__, rows.tolist()))
        block = np.frombuffer(b"".join(group), dtype=np.uint8).reshape(len(rows), length)
        left.extend(_parse_length_group(block, rows, keys, features, sinks, left).tolist())
    left.sort()
    if len(left) >= _MIN_GROUP:  # lengths differ (ragged features) or layouts do
        left = _parse_ragged(records, np.array(left), features, sinks).tolist()
    return left


def _parse_ragged(records, rows, features, sinks):
    """Parses the records ``rows`` of ``records`` (of any lengths) by one vectorized walk
    (:mod:`queuepipe.protos._ragged`); returns the rows left for the per-record parser: the
    records the walk does not follow, and those that would not parse cleanly with
    ``features`` (a list of another type, a wrong count, a required feature absent), so that
    the parser raises TF's error for the first of them."""
    ok, lists = _ragged.walk(list(map(records.__getitem__, rows.tolist())),
                             tuple(feature.key for feature in features))
    accept = ok.copy()
    for feature in features:
        found = lists[feature.key]
        present = found.list_tag > 0  # an empty Feature counts as absent, as in _template_fits
        accept &= ~present | (found.list_tag == _LIST_TAG[feature.list_name])
        if feature.kind == _FIXED:
            accept &= np.where(present, found.counts == feature.size, feature.default is not None)
        elif feature.kind == _SEQ:
            accept &= (found.counts % feature.size == 0) if feature.size else found.counts == 0
    for feature, sink in zip(features, sinks):
        found = lists[feature.key]
        counts = np.where(found.list_tag > 0, found.counts, 0)
        values = found.values
        if not accept[ok].all():  # keep the values of the accepted records only
            values = values[np.repeat(accept[ok], counts[ok])]
        if feature.kind != _FIXED:
            sink.put_ragged(rows[accept], counts[accept], values.astype(feature.dtype, copy=False))
            continue
        present = accept & (found.list_tag > 0)
        sink.put_block(rows[present], values.reshape(int(present.sum()), feature.size)
                       .astype(feature.dtype, copy=False))
        absent = accept & ~(found.list_tag > 0)
        if absent.any():
            sink.put_block(rows[absent], np.broadcast_to(feature.default,
                                                         (int(absent.sum()), feature.size)))
    return rows[~accept]


def _parse_length_group(block, rows, keys, features, sinks, left):
    """Decodes the rows of ``block`` (records of one length) that share a layout.

    Returns the rows not decoded; rows of a template that would not parse go to ``left``.
    """
    layout = _LAYOUTS.get((keys, block.shape[1]))
    for _ in range(_MAX_TEMPLATES + 1):
        if len(rows) < _MIN_GROUP:
            break
        if layout is None:
            layout = _layout.example_layout(block[0].tobytes(), keys)
            if layout is None:  # an encoding the walk does not handle: try the next record
                left.append(int(rows[0]))
                block, rows = block[1:], rows[1:]
                continue
            if len(_LAYOUTS) >= _MAX_CACHED:
                _LAYOUTS.clear()
            _LAYOUTS[keys, block.shape[1]] = layout
        matched = layout.matches(block)
        every = matched.all()  # the common case: the whole block, used as it is
        if all(_template_fits(f, layout.features.get(f.key)) for f in features):
            _decode_group(block if every else block[matched], rows if every else rows[matched],
                          layout, features, sinks)
        else:
            left.extend(rows[matched].tolist())
        if every:
            return rows[:0]
        block, rows = block[~matched], rows[~matched]
        layout = None
    return rows


def _decode_group(block, rows, layout, features, sinks):
    """Writes the values of ``block``'s records, all laid out as ``layout``, into ``sinks``."""
    if not len(rows):
        return
    for feature, sink in zip(features, sinks):
        values = layout.features.get(feature.key)
        if values is not None and values.list_name is not None:
            sink.put_block(rows, values.decode(block))
        elif feature.kind == _FIXED:  # absent: the default
            sink.put_block(rows, np.broadcast_to(feature.default, (len(rows), feature.size)))
        else:  # absent: no values
            sink.put_block(rows, np.empty((len(rows), 0), dtype=feature.dtype))


def _template_fits(feature, values):
    """True when a record laid out with ``values`` for ``feature`` parses without an error."""
    if values is None or values.list_name is None:
        return feature.kind != _FIXED or feature.default is not None
    if values.list_name != feature.list_name:
        return False
    if feature.kind == _FIXED:
        return values.count == feature.size
    if feature.kind == _SEQ:
        return (values.count % feature.size == 0) if feature.size else values.count == 0
    return True
