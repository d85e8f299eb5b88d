"""The errors the package raises: one class per status code of the C API.

The native layer (src/binding.cpp) turns the engine's C++ exceptions into
these exactly as engine/c_api.cpp turns them into codes: an etude::Error is
the caller's fault (InvalidArgument, or InvalidText where text was being
pushed), anything else is InternalError. The message is the engine's own,
the one `etude` prints.
"""

from __future__ import annotations


class EtudeError(RuntimeError):
    """Anything LibEtude refused or failed to do. ``code`` is the C API's
    etude_status for it (engine/etude.h)."""

    code = -3


class InvalidArgument(EtudeError):
    """ETUDE_ERROR_INVALID_ARGUMENT: an unknown voice, a bad rate or option,
    a closed engine or stream."""

    code = -1


class InvalidText(EtudeError):
    """ETUDE_ERROR_INVALID_TEXT: text that is not valid UTF-8 (bytes), or a
    ``str`` that cannot be encoded as UTF-8 (a lone surrogate)."""

    code = -2


class InternalError(EtudeError):
    """ETUDE_ERROR_INTERNAL: anything else (out of memory, a library fault)."""

    code = -3


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, InvalidText, InternalError)}


def error_class(code: int) -> type[EtudeError]:
    """The class for a C API status code (called by the native layer)."""
    return _BY_CODE.get(code, InternalError)
