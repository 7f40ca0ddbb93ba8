"""Builds queuepipe with its optional compiled core, the extension ``queuepipe._qpcore``.

The core is C99 with nothing beyond the C library and CPython's headers. Where it cannot be
built (no C compiler, no ``Python.h``) the install goes on with one warning and queuepipe runs
on its pure-Python path. Environment switches:

- ``QUEUEPIPE_REQUIRE_CORE=1``: a core that does not build fails the build (CI sets it).
- ``QUEUEPIPE_WERROR=1``: compiler warnings are errors (CI and ``make sanitize``).
- ``CFLAGS`` / ``LDFLAGS``: added as usual (``make sanitize`` passes the sanitizers there);
  an optimisation level in ``CFLAGS`` replaces our ``-O2``.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError

CORE_SOURCES = [
    "queuepipe/_core/columns.c",
    "queuepipe/_core/crc32c.c",
    "queuepipe/_core/frames.c",
    "queuepipe/_core/module.c",
    "queuepipe/_core/module_blocks.c",
    "queuepipe/_core/module_bytes.c",
    "queuepipe/_core/module_columns.c",
    "queuepipe/_core/module_example.c",
    "queuepipe/_core/wire.c",
]


def _switch(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


class OptionalBuildExt(build_ext):
    """build_ext that gives the pure path, with one warning, when the core does not build."""

    def run(self):
        try:
            super().run()
        except (BaseError, CCompilerError, OSError) as error:  # no compiler at all
            self._fall_back(error)

    def build_extension(self, ext):
        if self.compiler.compiler_type == "unix":
            flags = ["-std=c99", "-Wall", "-Wextra"]
            if "-O" not in os.environ.get("CFLAGS", ""):
                flags.insert(0, "-O2")
            if _switch("QUEUEPIPE_WERROR"):
                flags.append("-Werror")
            ext.extra_compile_args = flags
        try:
            super().build_extension(ext)
        except (BaseError, CCompilerError, OSError) as error:
            self._fall_back(error)

    def _fall_back(self, error):
        if _switch("QUEUEPIPE_REQUIRE_CORE"):
            raise
        print(f"WARNING: queuepipe's compiled core was not built ({error}); queuepipe will "
              "run on its pure-Python path, correct but slower. Install a C compiler and "
              "Python's headers (Debian: apt-get install gcc python3-dev) and reinstall to "
              "build it.", file=sys.stderr)


setup(
    ext_modules=[Extension("queuepipe._qpcore", sources=CORE_SOURCES,
                           depends=["queuepipe/_core/" + name for name in (
                               "crc32c.h", "endian.h", "frames.h", "gil.h", "module_bytes.h",
                               "module_example.h", "wire.h")])],
    cmdclass={"build_ext": OptionalBuildExt},
)
