"""TF1's ``tf.app.flags`` (also ``tf.flags``) and ``tf.app.run``: command-line flags the
absl way, on :mod:`argparse`.

``DEFINE_string("data_dir", "/tmp/data", "help")`` declares a flag; ``FLAGS.data_dir`` reads
it. ``tf.app.run(main)`` parses ``sys.argv``, calls ``main(argv)`` with the arguments left
over (the program name first) and exits with what ``main`` returns. A flag read before
``run`` parses the command line as it is then (unknown arguments left alone), so that
scripts that read ``FLAGS`` at import time, or under a test runner, still work.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ["FLAGS", "DEFINE_string", "DEFINE_integer", "DEFINE_float", "DEFINE_boolean",
           "DEFINE_bool", "DEFINE_list", "DEFINE_enum", "run"]


class _FlagValues:
    """The flags defined so far and their values (TF1's ``tf.app.flags.FLAGS``)."""

    def __init__(self):
        self.__dict__["_parser"] = argparse.ArgumentParser(add_help=False)
        self.__dict__["_defaults"] = {}
        self.__dict__["_booleans"] = set()
        self.__dict__["_values"] = None

    def define(self, name: str, default: Any, help_text: str, **argparse_args: Any) -> None:
        if name in self._defaults:
            raise ValueError(f"flag --{name} is defined twice")
        self._defaults[name] = default
        self._parser.add_argument(f"--{name}", dest=name, default=default, help=help_text,
                                  **argparse_args)
        self.__dict__["_values"] = None  # parsed again with the new flag

    def parse(self, argv: Sequence[str]) -> List[str]:
        """Parses ``argv`` (the program name first); returns it without the flags."""
        args = [f"{arg}=true" if arg[2:] in self._booleans and arg.startswith("--") else arg
                for arg in argv[1:]]  # a bare --flag takes no value, as with absl
        values, rest = self._parser.parse_known_args(args)
        self.__dict__["_values"] = vars(values)
        return [argv[0], *rest] if argv else rest

    def __getattr__(self, name: str) -> Any:
        if name not in self._defaults:
            raise AttributeError(f"flag --{name} is not defined (define it with "
                                 f"tf.app.flags.DEFINE_...)")
        if self._values is None:
            self.parse(sys.argv)
        return self._values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._defaults:
            raise AttributeError(f"flag --{name} is not defined")
        if self._values is None:
            self.parse(sys.argv)
        self._values[name] = value

    def __contains__(self, name: str) -> bool:
        return name in self._defaults

    def flag_values_dict(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self._defaults}


FLAGS = _FlagValues()


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "t", "yes", "y"):
        return True
    if lowered in ("0", "false", "f", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {text!r}")


def DEFINE_string(name: str, default: Optional[str], help: str) -> None:  # noqa: N802,A002
    FLAGS.define(name, default, help, type=str)


def DEFINE_integer(name: str, default: Optional[int], help: str) -> None:  # noqa: N802,A002
    FLAGS.define(name, default, help, type=int)


def DEFINE_float(name: str, default: Optional[float], help: str) -> None:  # noqa: N802,A002
    FLAGS.define(name, default, help, type=float)


def DEFINE_boolean(name: str, default: Optional[bool], help: str) -> None:  # noqa: N802,A002
    """``--name``, ``--noname`` and ``--name=false`` all work, as with absl."""
    FLAGS.define(name, default, help, type=_boolean)
    FLAGS._booleans.add(name)
    FLAGS._parser.add_argument(f"--no{name}", dest=name, action="store_false",
                               help=argparse.SUPPRESS)


DEFINE_bool = DEFINE_boolean


def DEFINE_list(name: str, default: Any, help: str) -> None:  # noqa: N802,A002
    """A comma-separated list of strings."""
    if isinstance(default, str):
        default = default.split(",") if default else []
    FLAGS.define(name, default, help, type=lambda text: text.split(",") if text else [])


def DEFINE_enum(name: str, default: Optional[str], enum_values: Sequence[str],  # noqa: N802
                help: str) -> None:  # noqa: A002
    FLAGS.define(name, default, help, type=str, choices=list(enum_values))


def run(main: Optional[Callable[[List[str]], Any]] = None,
        argv: Optional[Sequence[str]] = None) -> None:
    """TF1's ``tf.app.run``: parses the flags, then ``sys.exit(main(remaining argv))``
    (``__main__.main`` if ``main`` is None)."""
    rest = FLAGS.parse(list(sys.argv if argv is None else argv))
    entry = main if main is not None else sys.modules["__main__"].main
    sys.exit(entry(rest))
