"""``module:qualname`` references: how plans name Python functions and classes."""

from __future__ import annotations

import importlib
import traceback
from pathlib import Path
from typing import Any

from flink_agents.api.moved import moved_reference

REFERENCE_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
"""What a ``module:qualname`` reference looks like (plans and YAML validate against it)."""


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
        moved = moved_reference(reference) if isinstance(exc, ModuleNotFoundError) else None
        reason = (
            f"module {module_name!r} is not importable ({exc})"
            if moved is None
            else f"module {module_name!r} moved: use {moved!r}"
        )
        raise UnresolvableReference(reference, reason) from exc
    except Exception as exc:  # the module's own code raised: say where, not a bare traceback
        raise UnresolvableReference(
            reference,
            f"importing module {module_name!r} raised {type(exc).__name__}: {exc}{_raised_at(exc)}",
        ) from exc
    walked = module_name
    for part in qualname.split("."):
        if not hasattr(target, part):
            missing = f"{walked!r} has no attribute {part!r} (qualname {qualname!r})"
            raise UnresolvableReference(reference, missing + _renamed(reference))
        target = getattr(target, part)
        walked = f"{walked}.{part}"
    return target


def _renamed(reference: str) -> str:
    """``; it moved: use 'new'`` for a class of an earlier version, else nothing."""
    moved = moved_reference(reference)
    return "" if moved is None else f"; it moved: use {moved!r}"


_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


def _raised_at(exc: BaseException) -> str:
    """`` (at file:line)``: the innermost frame of ``exc`` in the user's code (not in this
    package or the import machinery, where a check the code failed raises), or nothing."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith((_PACKAGE_DIR, "<frozen"))
    ]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
