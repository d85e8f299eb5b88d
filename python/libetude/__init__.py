"""LibEtude: real-time streaming speech synthesis.

>>> import libetude
>>> with libetude.Engine() as engine:
...     audio = engine.synthesize("Hello.", voice="slt")   # float32, 16 kHz
...     with engine.stream(voice="slt") as s:
...         s.push_text("Hello there. ")
...         s.end_input()
...         for block in s:
...             pass                                     # play or send it

See docs/python.md.
"""

from . import _espeak_data  # noqa: F401  (names the wheel's espeak-ng data first)
from ._errors import EtudeError, InternalError, InvalidArgument, InvalidText
from ._native import EngineCapacity, FirstAudioMeasure, StreamStats
from ._engine import STREAM_OPTIONS, Engine, StreamOption
from ._stream import Mark, Stream
from ._voices import VoiceInfo, refresh_voices, voice_folders

__version__ = "0.1.0"

__all__ = [
    "Engine",
    "STREAM_OPTIONS",
    "StreamOption",
    "Stream",
    "Mark",
    "StreamStats",
    "EngineCapacity",
    "FirstAudioMeasure",
    "VoiceInfo",
    "EtudeError",
    "InvalidArgument",
    "InvalidText",
    "InternalError",
    "refresh_voices",
    "voice_folders",
    "__version__",
]
