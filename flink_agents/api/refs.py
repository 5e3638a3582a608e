"""``module:qualname`` references: how plans name Python functions and classes."""

from __future__ import annotations

import importlib
from typing import Any


class UnresolvableReference(ImportError):
    """A ``module:qualname`` reference that cannot be imported on this worker."""

    def __init__(self, reference: str, reason: str) -> None:
        super().__init__(f"cannot import {reference!r}: {reason}")
        self.reference = reference
        self.reason = reason


def class_path(obj: Any) -> str:
    """The ``module:qualname`` of a module-level function or class (or a class attribute)."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname:
        raise ValueError(f"{obj!r} has no module/qualname and cannot be referenced from a plan")
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(
            f"{module}:{qualname} is defined inside a function or is a lambda; plans can only "
            "reference module-level functions, classes and their attributes"
        )
    return f"{module}:{qualname}"


def import_reference(reference: str) -> Any:
    """Import ``module:qualname``; the error names the module or the missing attribute."""
    module_name, sep, qualname = reference.partition(":")
    if not sep or not module_name or not qualname:
        raise UnresolvableReference(reference, "expected the form 'module:qualname'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnresolvableReference(
            reference, f"module {module_name!r} is not importable ({exc})"
        ) from exc
    walked = module_name
    for part in qualname.split("."):
        if not hasattr(target, part):
            raise UnresolvableReference(
                reference, f"{walked!r} has no attribute {part!r} (qualname {qualname!r})"
            )
        target = getattr(target, part)
        walked = f"{walked}.{part}"
    return target
