"""What the adapter tests share: an engine wrapper that keeps every stream
an adapter opens, with the text pushed into it and its statistics as they
stood when the adapter closed it. (A module beside the tests, imported by
name: pytest puts this folder on the path.)"""


class RecordingEngine:
    """Passes calls to an engine and keeps every stream it opens.

    The adapters close their streams, and a closed stream has no stats (and
    closing cancels), so each stream's stats are kept as they stood just
    before it was closed.
    """

    def __init__(self, engine):
        self._engine = engine
        self.streams = []

    def stream(self, **options):
        stream = RecordedStream(self._engine.stream(**options))
        self.streams.append(stream)
        return stream

    def __getattr__(self, name):
        return getattr(self._engine, name)


class RecordedStream:
    def __init__(self, stream):
        self._stream = stream
        self.stats_at_close = None
        self.text = ""

    def push_text(self, text):
        self.text += text
        return self._stream.push_text(text)

    def close(self):
        if self.stats_at_close is None:
            self.stats_at_close = self._stream.stats()
        self._stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __aiter__(self):
        return self._stream.__aiter__()

    def __getattr__(self, name):
        return getattr(self._stream, name)
