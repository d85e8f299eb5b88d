"""The package speaks exactly what `etude say` speaks: offline, streamed in
pieces, from an event loop, and with a Piper voice and a seed."""

from __future__ import annotations

import asyncio

import numpy as np

from conftest import assert_same_audio, etude_say

TEXT = "Hello there. The quick brown fox jumps over the lazy dog, twice. Café au lait?"


def test_synthesize_equals_etude_say(engine, etude_bin, tmp_path):
    expected, rate = etude_say(etude_bin, tmp_path, TEXT, "--voice", "slt", "--rate", "16000")
    assert rate == 16000
    audio = engine.synthesize(TEXT, voice="slt", sample_rate=16000)
    assert audio.ndim == 1 and audio.dtype == np.float32
    assert audio.size > rate  # seconds of speech, not a blip
    assert_same_audio(audio, expected)


def test_synthesize_at_another_rate_equals_etude_say(engine, etude_bin, tmp_path):
    text = "Resampled to forty four point one kilohertz."
    expected, rate = etude_say(etude_bin, tmp_path, text, "--voice", "rms", "--rate", "44100")
    assert rate == 44100
    assert_same_audio(engine.synthesize(text, voice="rms", sample_rate=44100), expected)


def test_stream_in_pieces_cut_mid_word_equals_etude_say(engine, etude_bin, tmp_path):
    expected, _ = etude_say(etude_bin, tmp_path, TEXT, "--voice", "slt", "--rate", "16000")
    data = TEXT.encode()
    blocks = []
    with engine.stream(voice="slt", sample_rate=16000) as s:
        # Every 3 bytes: inside words and inside the two bytes of 'é'.
        for i in range(0, len(data), 3):
            s.push_text(data[i : i + 3])
        s.end_input()
        for block in s:
            assert block.dtype == np.float32 and block.ndim == 1 and block.size > 0
            assert not block.flags.owndata  # the engine's buffer, handed over uncopied
            blocks.append(block)
    assert len(blocks) > 10  # handed on block by block, not all at the end
    assert_same_audio(np.concatenate(blocks), expected)


def test_str_pieces_and_read_into_equal_synthesize(engine):
    expected = engine.synthesize(TEXT, voice="slt")
    buf = np.empty(1000, dtype=np.float32)
    got = []
    with engine.stream(voice="slt") as s:
        assert s.sample_rate == 16000  # the built-in voices' own rate
        for i in range(0, len(TEXT), 5):
            s.push_text(TEXT[i : i + 5])
        s.end_input()
        while (n := s.read_into(buf)) > 0:
            got.append(buf[:n].copy())
    assert_same_audio(np.concatenate(got), expected)


def test_two_streams_in_one_event_loop_match_their_offline_renders(engine):
    texts = {"slt": "The first stream speaks here. " * 3, "awb": "And the second one too. " * 3}
    expected = {v: engine.synthesize(t, voice=v) for v, t in texts.items()}
    order = []

    async def consume(voice: str) -> np.ndarray:
        blocks = []
        with engine.stream(voice=voice) as s:
            s.push_text(texts[voice])
            s.end_input()
            async for block in s:
                order.append(voice)
                blocks.append(block)
        return np.concatenate(blocks)

    async def both():
        return await asyncio.gather(consume("slt"), consume("awb"))

    slt, awb = asyncio.run(both())
    assert_same_audio(slt, expected["slt"])
    assert_same_audio(awb, expected["awb"])
    # Both iterated in the one loop. (Whether their blocks interleave is up
    # to the machine's scheduling, not a property to assert: under load one
    # stream may finish before the other's first sentence is analysed.)
    assert set(order) == {"slt", "awb"}


def test_piper_voice_with_a_seed_equals_etude_say(engine, etude_bin, joe_model, tmp_path):
    text = "A natural voice, seeded."
    expected, rate = etude_say(etude_bin, tmp_path, text, "--voice", joe_model, "--seed", "7")
    assert rate == 22050
    audio = engine.synthesize(text, voice="en_US-joe-medium", seed=7)
    assert_same_audio(audio, expected)
    # And the seed matters: another draws other noise.
    other = engine.synthesize(text, voice="en_US-joe-medium", seed=8)
    assert other.shape != audio.shape or not np.array_equal(other, audio)


def test_sentence_silence_equals_etude_say_and_adds_one_gap(engine, etude_bin, joe_model,
                                                            tmp_path):
    # Piper's --sentence-silence, as the table's sentence_silence_ms: one
    # 0.25 s span between the two sentences, none after the last.
    text = "This is sentence one. This is sentence two."
    plain = engine.synthesize(text, voice="en_US-joe-medium")
    spaced = engine.synthesize(text, voice="en_US-joe-medium", sentence_silence_ms=250)
    assert spaced.size - plain.size == 22050 // 4
    expected, _ = etude_say(etude_bin, tmp_path, text, "--voice", joe_model,
                            "--sentence-silence", "0.25")
    assert_same_audio(spaced, expected)
