"""Lazy public namespaces: a name is imported from its module the first time it is used.

``import queuepipe`` stays cheap (the time to the first batch starts with it), and the
namespaces ``qp``, ``qp.train``, ``qp.io`` and ``qp.python_io`` are thin tables from public
names to the modules that define them (PEP 562 module ``__getattr__``).
"""

import importlib


def namespace(module_name, table, submodules=()):
    """Returns ``(__getattr__, __dir__)`` for a module whose names come from ``table``.

    Args:
      module_name: the ``__name__`` of the namespace module.
      table: ``{public name: "queuepipe.submodule"}``; the attribute of the same name is taken
        from that submodule on first use and cached in the namespace module.
      submodules: names of ``module_name``'s own submodules, imported on first use.
    """
    namespace_module = importlib.import_module(module_name)

    def __getattr__(name):
        if name in submodules:
            return importlib.import_module(f"{module_name}.{name}")
        try:
            source = table[name]
        except KeyError:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(source), name)
        setattr(namespace_module, name, value)
        return value

    def __dir__():
        return sorted(set(table) | set(submodules) | set(vars(namespace_module)))

    return __getattr__, __dir__


def table_of(groups):
    """Flattens ``{module: [names]}`` into ``{name: module}``."""
    return {name: module for module, names in groups.items() for name in names}
