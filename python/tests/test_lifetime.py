"""Lifetimes: streams and engines as context managers, the engine closing
its streams, and streams made and dropped without leaking."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

import libetude
from conftest import hang_bound, skip_under_emulation

# qemu 7.2's user mode keeps about 280 KB of every guest thread that ended
# (measured on the development VM: an aarch64 program that starts and joins
# 1,000 threads grows by 250 MB under qemu-aarch64-static, by 0.3 MB
# natively), and each stream has a thread: the resident size measures qemu.
RSS_UNDER_EMULATION = skip_under_emulation(
    "qemu keeps ~280 KB of every thread that ended and each stream has one, "
    "so the resident size measures the emulator (the native suite runs this)")


# Run in a process of its own with one malloc arena: glibc's per-thread
# arenas (each stream has a thread) otherwise grow the resident size in
# steps of 3 to 6.5 MB at moments of their own and keep it, flat afterwards
# with the heap in use unchanged (measured here); with one arena the same
# run moves it by under 0.1 MB, so a real leak stands out.
CHURN = """
import gc, os, sys
import libetude

KEEP = []  # the self-check below keeps what a leak would keep


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def churn(engine, n):
    for i in range(n):
        if i % 10 == 0:  # some speak, as streams do, and hand out blocks
            with engine.stream(voice="slt", sample_rate=48000) as s:
                s.push_text("Hi.")
                s.end_input()
                blocks = list(s)
                assert sum(b.size for b in blocks) > 4800
                if sys.argv[1] == "leak":
                    KEEP.append(blocks)
        elif i % 2:
            with engine.stream(voice="slt") as s:
                s.push_text("Hi")  # held, then dropped by the close
        else:
            s = engine.stream(voice="slt", sample_rate=48000)
            del s  # freed by its last reference, without close()
    gc.collect()


with libetude.Engine() as engine:
    churn(engine, 100)  # the voice, the workers and the heap reach their working size
    after_100 = rss()
    churn(engine, 900)
    print(after_100, rss())
"""


def _churn(mode: str) -> int:
    r = subprocess.run(
        [sys.executable, "-c", CHURN, mode], capture_output=True, text=True, timeout=hang_bound(120),
        env={**os.environ, "MALLOC_ARENA_MAX": "1"},
    )
    assert r.returncode == 0, r.stderr
    after_100, after_1000 = map(int, r.stdout.split())
    return after_1000 - after_100


@RSS_UNDER_EMULATION
def test_a_thousand_streams_made_and_dropped_keep_the_resident_size_flat():
    # A stream's memory kept past its end (its core is ~4 KB, its ring 100 ms
    # of audio, 19 KB at 48 kHz) or the blocks' buffers never freed would add
    # megabytes over 900 streams; 1 MB is ten times the noise measured.
    growth = _churn("drop")
    assert growth < 1024 * 1024, f"resident size grew {growth / 1e6:.2f} MB over 900 streams"


@RSS_UNDER_EMULATION
def test_the_resident_size_check_sees_a_leak():
    # The same run keeping the blocks of the 90 streams that spoke (~30 KB
    # each), as a binding that never freed them would.
    assert _churn("leak") > 1024 * 1024


def test_closing_the_engine_closes_its_streams():
    engine = libetude.Engine()
    a = engine.stream(voice="slt")
    b = engine.stream(voice="rms")
    a.push_text("Closed before it is spoken.")
    engine.close()
    assert engine.closed and a.closed and b.closed
    with pytest.raises(libetude.InvalidArgument, match="closed"):
        a.push_text("more")
    with pytest.raises(libetude.InvalidArgument, match="closed"):
        engine.stream()
    a.close()  # twice is fine
    engine.close()


def test_a_stream_keeps_its_engine_alive():
    s = libetude.Engine().stream(voice="slt")  # the engine object is dropped at once
    gc.collect()
    s.push_text("Still speaking.")
    s.end_input()
    assert sum(b.size for b in s) > 8000
    s.close()


def test_context_managers_close(engine):
    with libetude.Engine(preload=[]) as e:
        with e.stream() as s:
            assert not s.closed
        assert s.closed
    assert e.closed


def test_stats_count_the_blocks_by_processor(engine):
    with engine.stream(voice="slt") as s:
        s.push_text("Counting blocks.")
        s.end_input()
        n = sum(b.size for b in s)
        st = s.stats()
    assert isinstance(st, libetude.StreamStats)
    assert st.samples_delivered == n
    assert st.blocks > 0
    assert st.blocks_primary + st.blocks_fallback + st.blocks_ahead + st.blocks_gpu == st.blocks
    assert st.first_audio_ms >= 0 and st.sentences_spoken == 1
    assert st.underruns == 0  # read offline, nothing waits on a deadline


def test_stats_say_where_a_piper_voices_flow_ran(engine, joe_model):
    # On the CPU backend every flow push is the CPU's; the fields come from
    # engine.h's StreamStats through the binding.
    with engine.stream(voice="en_US-joe-medium", backend="cpu") as s:
        s.push_text("Where does the flow run?")
        s.end_input()
        for _ in s:
            pass
        st = s.stats()
    assert st.flow_pushes_cpu > 0
    assert st.flow_pushes_gpu == 0 and st.flow_takeovers == 0
    assert st.flow_pushes_batched == 0  # batches are a device's
