"""Batches of ``bytes`` checked, and joined, in one pass: what ``parse_example`` takes its
records through and ``decode_raw`` its strings.

A batch here is a list, a tuple or a C-contiguous 1-D object array. :func:`exact_bytes`
gives its items as a new list when every one is exactly ``bytes`` (:func:`all_exact_bytes`
only says whether they are), :func:`join_equal` their
bytes one after the other in a new ``bytearray`` when they are also all of one length; both
give None otherwise, and the caller's general path converts what it accepts or raises its
error. The compiled core's one C loop each where it is loaded (a dozen times fewer
instructions than ``set(map(type, items))`` and ``np.fromiter(map(len, items))``), else the
pure twins below, which give the same results.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

import numpy as np

from queuepipe import _core

__all__ = ["all_exact_bytes", "exact_bytes", "join_equal", "pure_all_exact_bytes",
           "pure_exact_bytes", "pure_join_equal"]


def _listed(items: Any, function: str) -> List[Any]:
    """The items of a batch as a new list; TypeError, as the core raises, for what is no
    batch."""
    if type(items) is list or type(items) is tuple:
        return list(items)
    if isinstance(items, np.ndarray) and items.dtype == object and items.ndim == 1 \
            and items.flags.c_contiguous:
        return items.tolist()
    raise TypeError(f"{function} takes a list, a tuple or a C-contiguous 1-D object array")


def pure_exact_bytes(items: Any) -> Optional[List[bytes]]:
    """The items as a new list when every one is exactly ``bytes``, else None."""
    listed = _listed(items, "exact_bytes")
    return listed if set(map(type, listed)) <= {bytes} else None


def pure_all_exact_bytes(items: Any) -> bool:
    """Whether every item is exactly ``bytes``."""
    return set(map(type, _listed(items, "all_exact_bytes"))) <= {bytes}


def pure_join_equal(items: Any) -> Optional[bytearray]:
    """The items one after the other in a new ``bytearray`` when there is at least one, every
    one is exactly ``bytes`` and all have one length, else None."""
    listed = _listed(items, "join_equal")
    if not listed or not set(map(type, listed)) <= {bytes} or len(set(map(len, listed))) != 1:
        return None
    return bytearray().join(listed)


_compiled = _core.core
exact_bytes: Callable[[Any], Optional[List[bytes]]] = (
    _compiled.exact_bytes if _compiled is not None else pure_exact_bytes)
all_exact_bytes: Callable[[Any], bool] = (
    _compiled.all_exact_bytes if _compiled is not None else pure_all_exact_bytes)
join_equal: Callable[[Any], Optional[bytearray]] = (
    _compiled.join_equal if _compiled is not None else pure_join_equal)
