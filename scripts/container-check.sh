#!/usr/bin/env bash
# Builds the server's container image (server/deploy/Containerfile), runs it,
# and talks to it as Home Assistant and an OpenAI-style client would:
#   scripts/container-check.sh [--voice PATH/VOICE.onnx] [--python PY] [--etude ETUDE]
# With --voice, that Piper voice's folder is mounted at /voices and the voice
# is spoken too. Checks, each a failure when it does not hold:
#   - Wyoming describe lists the built-in voices (and the mounted one);
#   - Wyoming synthesize gives audio equal to ETUDE's offline render
#     (`etude say --raw`, the host build) of the same text and voice;
#   - HTTP POST /v1/audio/speech gives a WAV file;
#   - docker stop (SIGTERM) ends the server within 5 s with exit status 0.
# Needs a running Docker daemon and the test venv's Python (the `wyoming`
# package; scripts/bootstrap.sh test makes build/pyenv). Not part of the
# test suite: the image build compiles etude from scratch (minutes), and CI
# machines have no Docker daemon. Exit 0 pass, 1 fail, 77 no daemon.
# The server uses the host's network (--network host) so that the check also
# works where the daemon has no bridge; `docker run -p` is the usual way.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
python=$here/build/pyenv/bin/python
etude=$here/build/cli/etude
voice=
while [ $# -gt 0 ]; do
  case $1 in
    --voice) voice=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --etude) etude=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "container-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if ! docker info >/dev/null 2>&1; then
  echo "SKIP: no Docker daemon answers (docker info failed)"
  exit 77
fi
[ -x "$python" ] || { echo "container-check: no Python at $python (--python)" >&2; exit 2; }
[ -x "$etude" ] || { echo "container-check: no etude at $etude (--etude)" >&2; exit 2; }

image=etude:check
echo "container-check: building $image"
start=$(date +%s)
docker build --network host -f "$here/server/deploy/Containerfile" -t "$image" "$here" >/tmp/container-check-build.log 2>&1 ||
  { tail -30 /tmp/container-check-build.log; echo "container-check: build failed" >&2; exit 1; }
echo "container-check: built in $(( $(date +%s) - start )) s; $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wyoming_port=$(free_port)
http_port=$(free_port)
mounts=()
voice_name=
if [ -n "$voice" ]; then
  mounts=(-v "$(cd "$(dirname "$voice")" && pwd):/voices:ro")
  voice_name=$(basename "$voice" .onnx)
fi
container=$(docker run -d --network host "${mounts[@]}" "$image" \
  --wyoming "tcp://127.0.0.1:$wyoming_port" --http "127.0.0.1:$http_port")
trap 'docker rm -f "$container" >/dev/null 2>&1 || true' EXIT

status=0
"$python" - "$wyoming_port" "$etude" "$voice" "$voice_name" <<'EOF' || status=1
import asyncio, subprocess, sys, time
from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

port, etude, voice_path, voice_name = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
TEXT = "The kitchen lights are on, and the front door is locked."


async def connect():
    for _ in range(300):
        try:
            client = AsyncTcpClient("127.0.0.1", port)
            await client.connect()
            return client
        except OSError:
            await asyncio.sleep(0.1)
    raise SystemExit("container-check: the server never listened")


async def main():
    client = await connect()
    await client.write_event(Describe().event())
    info = Info.from_event(await client.read_event())
    names = [v.name for program in info.tts for v in program.voices]
    print(f"container-check: describe lists {', '.join(names)}")
    wanted = ["slt"] + ([voice_name] if voice_name else [])
    missing = [n for n in wanted if n not in names]
    failed = bool(missing)
    if missing:
        print(f"FAIL: describe does not list {missing}")
    await client.disconnect()
    for name, offline_voice in [("slt", "slt")] + ([(voice_name, voice_path)] if voice_name else []):
        client = await connect()
        start = time.monotonic()
        await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name=name)).event())
        audio, first = b"", None
        while True:
            event = await client.read_event()
            if event is None:
                break
            if AudioChunk.is_type(event.type):
                first = first or time.monotonic() - start
                audio += AudioChunk.from_event(event).audio
            elif AudioStop.is_type(event.type):
                break
        await client.disconnect()
        want = subprocess.run([etude, "say", "--voice", offline_voice, "--raw", TEXT],
                              check=True, capture_output=True).stdout
        same = audio == want
        print(f"container-check: {name}: {len(audio) // 2} samples, first audio after "
              f"{1000 * (first or 0):.0f} ms, {'equal to' if same else 'DIFFERENT from'} "
              f"the host's offline render ({len(want) // 2} samples)")
        failed |= not same
    sys.exit(1 if failed else 0)


asyncio.run(main())
EOF

wav=$(mktemp)
if curl -sf -o "$wav" -H 'Content-Type: application/json' \
     -d '{"model": "tts-1", "input": "Hello from the container.", "voice": "slt", "response_format": "wav"}' \
     "http://127.0.0.1:$http_port/v1/audio/speech" && [ "$(head -c 4 "$wav")" = RIFF ]; then
  echo "container-check: HTTP speech: a WAV file of $(stat -c %s "$wav") bytes"
else
  echo "FAIL: HTTP POST /v1/audio/speech did not give a WAV file"
  status=1
fi
rm -f "$wav"

start=$(date +%s%N)
docker stop -t 10 "$container" >/dev/null
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
code=$(docker inspect -f '{{.State.ExitCode}}' "$container")
echo "container-check: docker stop took $took_ms ms, exit status $code"
if [ "$code" != 0 ] || [ "$took_ms" -gt 5000 ]; then
  echo "FAIL: the server did not end cleanly on SIGTERM within 5 s"
  status=1
fi
[ $status = 0 ] && echo "container-check: passed" || echo "container-check: FAILED"
exit $status
