"""espeak-ng's data inside the wheel, named to the engine at import.

The wheel carries espeak-ng's data folder (``libetude/espeak-ng-data``) with
the espeak-ng library that auditwheel put beside the extension
(``libetude.libs``): the two are of one version, and the system may have
neither. The engine is told where the folder is before any Piper voice
loads (Engine::set_espeak_data, engine/engine.h), so espeak-ng searches
neither ``~/espeak-ng-data`` nor the path built into the library. Unless
ESPEAK_DATA_PATH is set: espeak-ng's own variable names other data here as
it does for every program linking espeak-ng. A package without the folder
(built with ETUDE_WITH_ESPEAK=OFF) leaves espeak-ng to its own search.
docs/python.md, "What the wheel carries".
"""

from __future__ import annotations

import os

from . import _native

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "espeak-ng-data")

if not os.environ.get("ESPEAK_DATA_PATH") and os.path.isfile(os.path.join(FOLDER, "phontab")):
    _native.set_espeak_data(FOLDER)
