"""The word marks of a stream whose audio an adapter passes on block by
block, each handed out once the audio it starts in has gone out, so that
the word and its audio leave in playback order (the pipecat and LiveKit
adapters). The stream must have been asked for its words
(Stream.report_words) before the text was pushed."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._stream import Mark, Stream


class HeardWords:
    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._pending: list[Mark] = []  # reached by production, not yet by the audio sent
        self.sent = 0  # samples passed on so far

    def after_block(self, samples: int) -> list[Mark]:
        """The words whose start the audio passed on so far (``samples``
        more than before) has reached, in order."""
        self.sent += samples
        self._pending.extend(m for m in self._stream.marks() if m.kind == "word")
        reached = 0
        while reached < len(self._pending) and self._pending[reached].sample < self.sent:
            reached += 1
        heard, self._pending = self._pending[:reached], self._pending[reached:]
        return heard

    def rest(self) -> list[Mark]:
        """Every word not handed out yet (the audio has ended)."""
        rest = self._pending + [m for m in self._stream.marks() if m.kind == "word"]
        self._pending = []
        return rest
