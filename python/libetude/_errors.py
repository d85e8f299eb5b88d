"""The errors the package raises: one class per failure status of the C API.

The engine holds the one mapping from its C++ exceptions to the C API's
status codes (engine/error.h); the native layer (src/binding.cpp) raises
the class that table names, exactly where engine/c_api.cpp returns that
code. The codes below come from the same table (_native.FAILURE_STATUSES):
nothing here restates a number. The message is the engine's own, the one
`etude` prints.
"""

from __future__ import annotations

from . import _native


class EtudeError(RuntimeError):
    """Anything LibEtude refused or failed to do. ``code`` is the C API's
    etude_status for it (engine/etude.h), ``c_name`` its name there."""

    code: int
    c_name: str


class InvalidArgument(EtudeError):
    """ETUDE_ERROR_INVALID_ARGUMENT: an unknown voice, a bad rate or option,
    a closed engine or stream."""


class InvalidText(EtudeError):
    """ETUDE_ERROR_INVALID_TEXT: text that is not valid UTF-8 (bytes), or a
    ``str`` that cannot be encoded as UTF-8 (a lone surrogate)."""


class InternalError(EtudeError):
    """ETUDE_ERROR_INTERNAL: anything else (out of memory, a library fault)."""


def _codes_from_the_engine() -> dict[int, type[EtudeError]]:
    """Gives each class the code and name the engine's table pairs with it;
    a table entry without its class here (or a class without an entry) is a
    broken build, refused at import."""
    classes = {cls.__name__: cls for cls in (InvalidArgument, InvalidText, InternalError)}
    by_code: dict[int, type[EtudeError]] = {}
    for code, c_name, python_class in _native.FAILURE_STATUSES:
        cls = classes.pop(python_class, None)
        if cls is None:
            raise ImportError(f"libetude._errors has no class {python_class} for {c_name}")
        cls.code, cls.c_name = code, c_name
        by_code[code] = cls
    if classes:
        raise ImportError(f"libetude._errors: {sorted(classes)} are not in the engine's table")
    EtudeError.code, EtudeError.c_name = InternalError.code, InternalError.c_name
    return by_code


_BY_CODE = _codes_from_the_engine()


def error_class(code: int) -> type[EtudeError]:
    """The class for a C API status code."""
    return _BY_CODE.get(code, InternalError)
