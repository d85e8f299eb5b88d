"""The package's one float-to-16-bit rule, for the WAV writer of
``python -m libetude say`` and the framework adapters (which hand 16-bit
PCM on): the same samples as ``etude say -o``."""

import numpy as np


def to_pcm16(samples: np.ndarray) -> bytes:
    """16-bit little-endian PCM, rounded to nearest-even and clipped, as
    audio-io's float_to_pcm16() does for `etude say -o`."""
    scaled = np.rint(np.asarray(samples, dtype=np.float32) * np.float32(32768.0))
    return np.clip(scaled, -32768, 32767).astype("<i2").tobytes()
