#!/usr/bin/env bash
# Smoke tests of the example programs (registered by examples/CMakeLists.txt
# as examples.<name>): each example really runs, and what it produced is
# checked against numbers derived independently of it, e.g. the length of
# the same text rendered offline by the etude program.
#
# usage: smoke.sh EXAMPLE PROGRAM ETUDE_CLI TEST_DATA_DIR WORK_DIR
set -u
example=$1 program=$2 etude=$3 data=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

fail() {
    echo "FAIL ($example): $*" >&2
    [ -f out.txt ] && sed 's/^/  | /' out.txt >&2
    exit 1
}

# The integer after "$2" in file $1 (e.g. "underruns 0"), or empty.
number_after() { sed -n "s/.*$2 \([0-9][0-9]*\).*/\1/p" "$1" | head -n 1; }

# Samples of TEXT rendered offline at RATE by the etude program (16-bit raw).
offline_samples() {
    local bytes
    bytes=$("$etude" say --raw --rate "$2" "$1" | wc -c) || fail "etude say failed"
    echo $((bytes / 2))
}

# A private headless JACK server, named so that no other test's server is
# touched; clients find it through JACK_DEFAULT_SERVER. Real-time when root,
# as tests/support/jack_harness.h does.
jackd_pid=
start_jackd() {
    export JACK_DEFAULT_SERVER="etude-example-$example-$$"
    export JACK_NO_START_SERVER=1
    local rt=()
    [ "$(id -u)" = 0 ] && rt=(-R)
    jackd -n "$JACK_DEFAULT_SERVER" "${rt[@]}" -d dummy -r 48000 -p 1024 > jackd.log 2>&1 &
    jackd_pid=$!
    trap stop_jackd EXIT
    jack_wait -w -t 20 > /dev/null 2>&1 || fail "jackd did not start: $(cat jackd.log)"
}
stop_jackd() {
    kill "$jackd_pid" 2> /dev/null && wait "$jackd_pid" 2> /dev/null
}

run() {  # PROGRAM ARGS..., output to out.txt; not in a pipeline, so that fail() ends the test
    timeout -s KILL 120 "$@" > out.txt 2>&1
    local rc=$?
    [ $rc = 0 ] || fail "exit status $rc from $*"
}

case $example in
jack_tts)
    start_jackd
    printf 'Hello from JACK.\nThis is a second line.\n' > lines.txt
    run "$program" --connect < lines.txt
    grep -q "sentences 2 spoken, 0 dropped" out.txt || fail "both lines must be spoken"
    [ "$(number_after out.txt underruns)" = 0 ] || fail "underruns"
    expected=$(offline_samples "Hello from JACK. This is a second line." 48000)
    got=$(number_after out.txt "jack_tts:")
    [ "$got" = "$expected" ] || fail "played $got samples, the offline render has $expected"
    ;;
assistant)
    first="Sure, here is a long answer about the weather. It will be sunny in the morning."
    second="Okay, stopping. What else can I do for you?"
    # The barge-in comes 300 ms after reply 1 is first heard, not at a fixed
    # time: on a loaded machine its first audio may take longer than that.
    printf 'say %s\nheard\nsleep 300\nbarge\nsay %s\n' "$first" "$second" > script.txt
    run "$program" -o played.wav < script.txt
    grep -q ", 1 cancels," out.txt || fail "expected exactly one cancel"
    full1=$(offline_samples "$first" 16000)
    full2=$(offline_samples "$second" 16000)
    got1=$(number_after out.txt "reply 1:")
    got2=$(number_after out.txt "reply 2:")
    # Reply 1 was cut by the barge-in; reply 2 was spoken whole. Its count
    # may include the 5 ms (80-sample) fade-out of reply 1.
    [ -n "$got1" ] && [ "$got1" -gt 0 ] && [ "$got1" -lt "$full1" ] ||
        fail "reply 1 played $got1 samples; expected some, fewer than its $full1"
    [ -n "$got2" ] && [ "$got2" -ge "$full2" ] && [ "$got2" -le $((full2 + 80)) ] ||
        fail "reply 2 played $got2 samples; the offline render has $full2"
    [ -s played.wav ] || fail "no played.wav"
    ;;
portaudio_player)
    start_jackd
    text="Hello through PortAudio."
    run "$program" --host-api JACK "$text"
    grep -q "JACK Audio Connection Kit" out.txt || fail "did not play through JACK"
    expected=$(offline_samples "$text" 48000)
    got=$(number_after out.txt "portaudio_player:")
    [ "$got" = "$expected" ] || fail "played $got samples, the offline render has $expected"
    grep -q " 0 underruns," out.txt || fail "underruns"
    ;;
vocode_stream)
    # Uneven chunks (5 frames; the last has 3) must not change a sample.
    run "$program" "$data/neural/hifigan_v1.lef" "$data/neural/hifigan_v1_mel.npy" out.wav --chunk 5
    grep -q "10 chunks of up to 5 frames, 48 frames vocoded" out.txt || fail "chunk count"
    grep -q "model latency [0-9]" out.txt || fail "no model latency"
    # Expected: 48 frames x hop 256 at 22050 Hz, equal to PyTorch's output
    # (hifigan_v1_out.npy) within 16-bit rounding.
    /usr/bin/python3 - "$data/neural" out.wav << 'EOF' || fail "WAV check failed"
import sys, wave
import numpy as np
ref = np.load(sys.argv[1] + "/hifigan_v1_out.npy")
mel = np.load(sys.argv[1] + "/hifigan_v1_mel.npy")
with wave.open(sys.argv[2]) as w:
    rate, n, width = w.getframerate(), w.getnframes(), w.getsampwidth()
    x = np.frombuffer(w.readframes(n), dtype="<i2") / 32768.0
expected = mel.shape[1] * 256
print(f"{sys.argv[2]}: {n} samples at {rate} Hz; expected {expected} at 22050")
assert rate == 22050 and width == 2 and n == expected == len(ref)
err = float(np.max(np.abs(x - ref)))
print(f"max difference from PyTorch: {err:.2e}")
assert err <= 0.5 / 32768 + 1e-5
EOF
    ;;
*)
    fail "unknown example"
    ;;
esac
echo "PASS ($example)"
cat out.txt
