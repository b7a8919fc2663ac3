"""Resolve MM2's pluggable ``*.class`` settings to Python classes.

MM2 lets users plug Java classes (replication policy, topic/group/config-property filters). The
Java names of MM2's own implementations map to our ports; anything else must be a Python class
named by its dotted path, because mirrorflow cannot run Java code. One resolver for all of them so
every such setting fails the same, clear way.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")

_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*[.:][A-Za-z_]\w*$")
_JAVA_PACKAGES = ("org.apache.kafka.", "com.", "io.", "org.")


class ClassLoadError(ValueError):
    """A ``*.class`` setting that names nothing mirrorflow can run."""


def load_class(name: str, base: type[T], builtins: Mapping[str, type[T]], what: str) -> type[T]:
    """The class named by ``name``: a known Java name, or a Python ``package.module.Class`` subclassing ``base``."""
    name = name.strip()
    if name in builtins:
        return builtins[name]
    if not _DOTTED.match(name):
        raise ClassLoadError(f"'{name}' is not a known {what} nor a dotted Python class path (package.module.Class)")
    module_name, _, attr = name.replace(":", ".").rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if name.startswith(_JAVA_PACKAGES):
            known = ", ".join(sorted(k for k in builtins if "." in k))
            raise ClassLoadError(
                f"unknown {what} '{name}': mirrorflow runs Python, so Java classes other than {known} "
                "must be re-implemented as a Python class named by its dotted path"
            ) from None
        raise ClassLoadError(f"cannot import {what} module '{module_name}': {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a user module that fails on import (SyntaxError, ...) is a config error
        raise ClassLoadError(f"importing {what} module '{module_name}' failed: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ClassLoadError(f"'{name}' is not a subclass of {base.__module__}.{base.__qualname__}")
    return cls
