"""TF1's ``tf.logging``: Python's :mod:`logging` under the logger ``queuepipe.tf1``.

``tf.logging.set_verbosity(tf.logging.INFO)`` then ``tf.logging.info("step %d", n)`` print
``INFO:queuepipe.tf1:step 3`` (TF prints ``INFO:tensorflow:...``). The levels are Python's,
as TF's are (``DEBUG`` 10 ... ``FATAL`` 50).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["DEBUG", "INFO", "WARN", "ERROR", "FATAL", "debug", "info", "warn", "warning",
           "error", "fatal", "log", "vlog", "log_every_n", "log_first_n", "log_if",
           "set_verbosity", "get_verbosity", "flush", "NAMES"]

DEBUG, INFO, WARN, ERROR, FATAL = (logging.DEBUG, logging.INFO, logging.WARN, logging.ERROR,
                                   logging.FATAL)
_logger = logging.getLogger("queuepipe.tf1")
_counts: dict = {}


def _handled() -> logging.Logger:
    """The logger, given a handler at first use (as TF's prints without configuration)."""
    if not _logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
        _logger.addHandler(handler)
        _logger.propagate = False
        if _logger.level == logging.NOTSET:
            _logger.setLevel(WARN)  # TF's default verbosity
    return _logger


def log(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    _handled().log(level, msg, *args, **kwargs)


def debug(msg: Any, *args: Any, **kwargs: Any) -> None:
    log(DEBUG, msg, *args, **kwargs)


def info(msg: Any, *args: Any, **kwargs: Any) -> None:
    log(INFO, msg, *args, **kwargs)


def warning(msg: Any, *args: Any, **kwargs: Any) -> None:
    log(WARN, msg, *args, **kwargs)


warn = warning


def error(msg: Any, *args: Any, **kwargs: Any) -> None:
    log(ERROR, msg, *args, **kwargs)


def fatal(msg: Any, *args: Any, **kwargs: Any) -> None:
    log(FATAL, msg, *args, **kwargs)


def vlog(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    log(level, msg, *args, **kwargs)


def log_if(level: int, msg: Any, condition: Any, *args: Any) -> None:
    if condition:
        log(level, msg, *args)


def log_every_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Logs the 1st, (n+1)th, (2n+1)th... call from the same place."""
    key = ("every", msg, n)
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    log_if(level, msg, count % n == 0, *args)


def log_first_n(level: int, msg: Any, n: int, *args: Any) -> None:
    key = ("first", msg, n)
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    log_if(level, msg, count < n, *args)


def set_verbosity(v: int) -> None:
    _handled().setLevel(v)


def get_verbosity() -> int:
    return _handled().getEffectiveLevel()


def flush() -> None:
    for handler in _handled().handlers:
        handler.flush()


NAMES = {name: globals()[name] for name in __all__ if name != "NAMES"}
