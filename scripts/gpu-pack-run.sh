#!/usr/bin/env bash
# shellcheck disable=SC2154  # pack.env, sourced below, sets the filters and needed_* versions
# run.sh OUT: runs the CUDA and Vulkan tests and benchmarks of this pack
# (written by LibEtude's scripts/gpu-check.sh pack) and writes the results
# under OUT (the cuda-* files hold both, CUDA's and Vulkan's, side by side):
#   summary.txt         date, machine, GPU, pack, counts, verdict
#   cuda-tests.xml/.log gtest results and console output of the backend's
#                       tests (etude_tests_gpu)
#   cuda-model-tests.xml/.log the same for the model layer's parity tests
#                       (neural vocoders, Piper voices; etude_tests_engine_models)
#   cuda-engine-tests.xml/.log the same for the engine's device tests (Piper
#                       streams' flow batches and replays, device faults;
#                       etude_tests_engine; in a pack-all folder only)
#   cuda-bench.json/.log Google Benchmark results and console output
#   cuda-tests-list.txt, cuda-model-tests-list.txt, cuda-engine-tests-list.txt
#                       the tests the filter selects (written even without a GPU)
# and, for a pack made by `gpu-check.sh pack-streams` or `pack-all` (what
# runs is what bin/ holds):
#   many-streams-cuda.log, many-streams-vulkan.log
#                       N Piper streams pulled in real time on each device
#                       (bench/many_streams.cpp), piper-voice.log its voice;
#   many-streams-cuda-direct.log, many-streams-cuda-tf32.log
#                       the offline aggregate on CUDA with its direct
#                       convolution kernels, and in TF32;
#   many-streams-cuda-ops.log the device's operations per second of audio
#   many-streams-cuda-offline.log 1,024 streams read offline on CUDA
# Needs: an NVIDIA driver and CUDA 13's cuFFT and cuBLAS on the machine (found
# through $ETUDE_CUDA_LIB_DIR, $LD_LIBRARY_PATH, ldconfig, $CUDA_HOME,
# $CUDA_PATH, nvcc's folder, /usr/local/cuda*, or PyTorch's nvidia wheels).
# Exit status: 0 when every selected test passed (or when there is no GPU,
# which it says), 1 when something failed, 2 for a usage error.
# Environment: ETUDE_CUDA_TEST_FILTER / ETUDE_CUDA_BENCH_FILTER replace the
# pack's filters; ETUDE_GPU_CHECK_TIMEOUT (seconds, default 300) bounds each
# of the two programs.
set -uo pipefail

pack=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 1 ]; then
  sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
out=$1
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
# shellcheck source=/dev/null
. "$pack/pack.env"
test_filter=${ETUDE_CUDA_TEST_FILTER:-$cuda_test_filter}
bench_filter=${ETUDE_CUDA_BENCH_FILTER:-$cuda_bench_filter}
limit=${ETUDE_GPU_CHECK_TIMEOUT:-300}
summary=$out/summary.txt

say() { echo "$*" | tee -a "$summary"; }
count() { local n; n=$(grep -c -- "$1" "$2" 2>/dev/null); echo "${n:-0}"; }
: >"$summary"
say "LibEtude GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
say "pack: $packed_from, packed $packed_on"

# The programs, libraries, data and scripts travel gzipped (gpu-check.sh
# says why); this run unpacks them into a folder of its own, removed at exit.
files=$(mktemp -d) || exit 1
models=""
piper_models=""
trap 'rm -rf "$files" ${models:+"$models"} ${piper_models:+"$piper_models"}' EXIT
if ! tar -xzf "$pack/payload.tar.gz" -C "$files"; then
  say "FAILED: cannot unpack $pack/payload.tar.gz"
  exit 1
fi

# glibc is the one system library the pack does not carry (scripts/gpu-check.sh
# says why). Our libstdc++ asks for a newer glibc than the rest of the pack:
# on an older glibc the machine's own libstdc++ and libgcc_s stand in for
# lib/cxx/ when they offer every version our programs ask for.
older() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
system_lib() { "$ldconfig" -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64/ {print $NF; exit}'; }
have_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
lib_path=$files/lib:$files/lib/cxx
if [ -n "$have_glibc" ] && older "$have_glibc" "$needed_glibc"; then
  sys_cxx=$(system_lib libstdc++.so.6)
  sys_gcc=$(system_lib libgcc_s.so.1)
  if older "$have_glibc" "$needed_glibc_without_cxx" || [ -z "$sys_cxx" ] || [ -z "$sys_gcc" ] ||
     ! grep -aq "GLIBCXX_$needed_glibcxx" "$sys_cxx" || ! grep -aq "CXXABI_$needed_cxxabi" "$sys_cxx" ||
     ! grep -aq "GCC_$needed_gcc" "$sys_gcc"; then
    say "FAILED: this machine's glibc is $have_glibc; the pack needs $needed_glibc_without_cxx or newer,"
    say "and $needed_glibc or newer unless the machine's libstdc++ offers GLIBCXX_$needed_glibcxx"
    exit 1
  fi
  say "glibc $have_glibc: using this machine's $sys_cxx instead of the pack's (which needs glibc $needed_glibc)"
  lib_path=$files/lib
fi

caller_path=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH="$lib_path${caller_path:+:$caller_path}"
export ETUDE_CUDA_MODULE="$files/lib/libetude_cuda.so"

# The model tests read their reference data from the pack.
export ETUDE_TEST_DATA="$files/data"
# Vulkan runs on the machine's own driver (NVIDIA's ICD): never on a driver
# a caller forced for tests elsewhere. NVIDIA's usual manifest
# (nvidia_icd.json) names libGLX_nvidia.so.0, whose Vulkan entry point gives
# no vkCreateInstance on a machine without a display (seen on a lent H100 in
# a container: "Could not get 'vkCreateInstance' via
# 'vk_icdGetInstanceProcAddr'"); the same driver's EGL library,
# libEGL_nvidia.so.0, exports the same ICD interface and works headless. So
# when that library is there, the loader is given a manifest naming it and
# nothing else (the GPU is then listed once).
unset VK_ICD_FILENAMES VK_DRIVER_FILES
nvidia_egl=$(system_lib libEGL_nvidia.so.0)
if [ -z "$nvidia_egl" ]; then
  for dir in $(tr ':' ' ' <<<"$caller_path"); do
    [ -e "$dir/libEGL_nvidia.so.0" ] && { nvidia_egl=$dir/libEGL_nvidia.so.0; break; }
  done
fi
if [ -n "$nvidia_egl" ]; then
  printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' \
    "$nvidia_egl" >"$files/nvidia_headless_icd.json"
  export VK_DRIVER_FILES="$files/nvidia_headless_icd.json"
  export VK_ICD_FILENAMES="$VK_DRIVER_FILES"
  vulkan_driver="NVIDIA's EGL library $nvidia_egl (headless)"
else
  vulkan_driver="the loader's own search (no libEGL_nvidia.so.0 found)"
fi
# The neural vocoders' benchmarks on Vulkan too (bench/neural_bench.cpp).
export ETUDE_BENCH_VULKAN=1
# What runs is what the payload holds, so that a folder made by hand from
# both packs runs both in one call (one GPU machine start): each test program
# found in bin/ with the name of its result files, the kernel benchmarks when
# etude_bench is there, the many-streams run when etude_many_streams is.
programs=""
for entry in etude_tests_gpu:cuda-tests etude_tests_engine_models:cuda-model-tests \
             etude_tests_engine:cuda-engine-tests; do
  [ -f "$files/bin/${entry%%:*}" ] && programs="$programs $entry"
done
has_bench=false has_streams=false
[ -f "$files/bin/etude_bench" ] && has_bench=true
[ -f "$files/bin/etude_many_streams" ] && has_streams=true
say "pack kind: ${pack_kind:-main}; test programs:${programs:- none}; kernel benchmarks: $has_bench; many streams: $has_streams"

# The programs must start from the pack alone, GPU or not.
selected=0
for entry in $programs; do
  program=${entry%%:*} base=${entry#*:}
  if ! "$files/bin/$program" --gtest_list_tests --gtest_filter="$test_filter" \
         >"$out/$base-list.txt" 2>&1; then
    say "FAILED: the packed test program $program does not start:"
    tee -a "$summary" <"$out/$base-list.txt"
    exit 1
  fi
  selected=$((selected + $(count '^  ' "$out/$base-list.txt")))
done
[ -n "$programs" ] && say "tests selected by '$test_filter': $selected"
if $has_streams; then
  # Without arguments it prints its usage and exits 2: it starts.
  started=$("$files/bin/etude_many_streams" 2>&1)
  if ! grep -q '^usage: etude_many_streams' <<<"$started"; then
    say "FAILED: the packed etude_many_streams does not start:"
    head -5 <<<"$started" | tee -a "$summary"
    exit 1
  fi
  say "etude_many_streams starts"
fi

gpus=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep '^GPU ' || true)
fi
if [ -z "$gpus" ] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  say "no NVIDIA GPU on this machine (nvidia-smi lists none, no /dev/nvidia0): nothing run."
  say "The pack itself starts; run it again on a machine with a GPU."
  exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1
  say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | paste -sd ';')"
else
  say "GPU: /dev/nvidia0 present, nvidia-smi absent"
fi

# cuFFT and cuBLAS come from the machine: the first folder, in the order the
# header names, that holds each soname the module needs.
candidate_dirs() {
  [ -n "${ETUDE_CUDA_LIB_DIR:-}" ] && echo "$ETUDE_CUDA_LIB_DIR"
  tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}"
  "$ldconfig" -p 2>/dev/null | sed -n 's/.*=> \(.*\)\/[^/]*$/\1/p' | sort -u
  local d
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" \
           "$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/bin/nvcc)")")" \
           /usr/local/cuda /usr/local/cuda-*; do
    [ -n "$d" ] && echo "$d/lib64" && echo "$d/lib" && echo "$d/targets/x86_64-linux/lib"
  done
  if command -v python3 >/dev/null 2>&1; then
    python3 - 2>/dev/null <<'EOF'
import glob, os, site
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for lib in sorted(glob.glob(os.path.join(root, "nvidia", "**", "lib"), recursive=True)):
        print(lib)
EOF
  fi
}
cuda_dirs=""
missing=""
dirs=$(candidate_dirs)
for lib in $needed_cuda_libs; do
  found=""
  while read -r d; do
    if [ -n "$d" ] && [ -e "$d/$lib" ]; then found=$d; break; fi
  done <<<"$dirs"
  if [ -z "$found" ]; then
    missing="$missing $lib"
  elif [[ ":$cuda_dirs:" != *":$found:"* ]]; then
    cuda_dirs="${cuda_dirs:+$cuda_dirs:}$found"
  fi
done
if [ -n "$missing" ]; then
  say "FAILED: CUDA 13 libraries not found on this machine:$missing"
  say "Set ETUDE_CUDA_LIB_DIR to the folder that holds them."
  exit 1
fi
say "CUDA libraries ($needed_cuda_libs) from: $cuda_dirs"
say "Vulkan driver: $vulkan_driver"
export LD_LIBRARY_PATH="$lib_path:$cuda_dirs${caller_path:+:$caller_path}"

status=0
for entry in $programs; do
  program=${entry%%:*} base=${entry#*:}
  timeout "$limit" "$files/bin/$program" --gtest_filter="$test_filter" \
    --gtest_output="xml:$out/$base.xml" >"$out/$base.log" 2>&1
  tests_rc=$?
  ran=$(count '<testcase ' "$out/$base.xml")
  failed=$(count '<failure ' "$out/$base.xml")
  skipped=$(count '<skipped ' "$out/$base.xml")
  say "$program: exit $tests_rc; $ran run, $failed failure messages, $skipped skipped ($base.xml)"
  grep -E '^\[  (FAILED|SKIPPED) ' "$out/$base.log" | grep -v ' ms)$' | sort -u | tee -a "$summary"
  if [ "$skipped" -gt 0 ]; then
    say "the first reason for a skip:"
    grep -A1 -m1 ': Skipped$' "$out/$base.log" | tail -1 | tee -a "$summary"
  fi
  if [ "$tests_rc" -ne 0 ] || [ "$ran" -eq 0 ] || [ "$skipped" -eq "$ran" ]; then
    say "$program FAILED (a run where every test skips did not check the GPU: see $base.log)"
    status=1
  fi
done

if $has_bench; then
  # The neural benchmarks read full-size models (random weights, published
  # sizes) from $ETUDE_MODELS_DIR: made here when python3 has torch, numpy and
  # yaml, in a temporary folder (they are too large to return with the results).
  if [ -z "${ETUDE_MODELS_DIR:-}" ]; then
    if command -v python3 >/dev/null 2>&1 && python3 -c 'import torch, numpy, yaml' 2>/dev/null; then
      models=$(mktemp -d)
      if timeout "$limit" python3 -B "$files/tools/make_parity_data.py" --full-size "$models" \
           >"$out/models.log" 2>&1; then
        export ETUDE_MODELS_DIR=$models
        say "neural benchmarks: full-size models made with this machine's PyTorch (models.log)"
      else
        say "neural benchmarks will skip: making their models failed (models.log)"
      fi
    else
      say "neural benchmarks will skip: making their models needs python3 with torch, numpy and yaml"
    fi
  else
    say "neural benchmarks: models from ETUDE_MODELS_DIR=$ETUDE_MODELS_DIR"
  fi

  timeout "$limit" "$files/bin/etude_bench" --benchmark_filter="$bench_filter" \
    --benchmark_out="$out/cuda-bench.json" --benchmark_out_format=json >"$out/cuda-bench.log" 2>&1
  bench_rc=$?
  benchmarks=$(count '"run_name"' "$out/cuda-bench.json")
  errors=$(count '"error_occurred": true' "$out/cuda-bench.json")
  say "benchmarks ('$bench_filter'): exit $bench_rc; $benchmarks results, $errors with an error (cuda-bench.json)"
  [ "$bench_rc" -eq 0 ] || status=1
fi

if $has_streams; then
  # Many streams of one Piper voice with its decoder on each device
  # (bench/many_streams.cpp): first audio, underruns of streams pulled in real
  # time, and the aggregate speed, i.e. how many real-time streams one device
  # holds. The voice: a full-size medium voice with random weights, made here
  # when python3 has torch and onnx (tools/piper_reference/make_voices.py),
  # else the pack's small test voice, whose figures then measure launches and
  # scheduling rather than a real voice's work. Phoneme ids rather than text:
  # the pack carries no espeak-ng data. ETUDE_MANY_STREAMS sets the counts,
  # ETUDE_MANY_STREAMS_BACKENDS the devices (cpu too: the same machine's CPU
  # alone, to see what the GPU adds).
  many_voice=$files/data/piper/test_medium.onnx
  many_voice_kind="the pack's small test voice test_medium (no full-size voice)"
  if command -v python3 >/dev/null 2>&1 && python3 -c 'import torch, onnx' 2>/dev/null; then
    piper_models=$(mktemp -d)
    if timeout "$limit" python3 -B "$files/tools/piper_reference/make_voices.py" \
         --full-size "$piper_models" --sizes medium >"$out/piper-voice.log" 2>&1; then
      many_voice=$piper_models/full_medium.onnx
      many_voice_kind="a full-size medium voice with random weights (piper-voice.log)"
    else
      many_voice_kind="$many_voice_kind: making a full-size voice failed (piper-voice.log)"
    fi
  else
    many_voice_kind="$many_voice_kind: making one needs python3 with torch and onnx"
  fi
  say "many streams: $many_voice_kind"
  # The GPU's busy share while a run lasts: nvidia-smi dmon's SM column, a
  # sample a second (issue 41 asks for it beside the host's share, which
  # etude_many_streams prints itself).
  gpu_busy_start() {
    busy_log=$1
    if command -v nvidia-smi >/dev/null 2>&1; then
      nvidia-smi dmon -s u -d 1 >"$busy_log" 2>&1 &
      busy_pid=$!
    else
      busy_pid=
    fi
  }
  gpu_busy_stop() {
    [ -n "$busy_pid" ] || return 0
    kill "$busy_pid" 2>/dev/null
    wait "$busy_pid" 2>/dev/null
    awk '!/^#/ && NF >= 2 && $2 ~ /^[0-9]+$/ { n++; s += $2; if ($2 > m) m = $2 }
         END { if (n) printf "  GPU SM busy: mean %.0f%%, max %d%% over %d s\n", s / n, m, n }' \
      "$busy_log" | tee -a "$summary"
  }
  # etude_many_streams on the run's voice and ids, one round, its output in
  # LOG: many_streams LOG ARGS...; its exit status.
  many_streams() {
    local log=$1
    shift
    timeout "$limit" "$files/bin/etude_many_streams" --voice "$many_voice" \
      --ids-from "$files/data/piper/reference.json" --rounds 1 "$@" >"$log" 2>&1
  }
  for backend in ${ETUDE_MANY_STREAMS_BACKENDS:-cuda vulkan}; do
    gpu_busy_start "$out/gpu-busy-$backend.log"
    many_streams "$out/many-streams-$backend.log" --backend "$backend" \
      --streams "${ETUDE_MANY_STREAMS:-1,16,64,256}"
    many_rc=$?
    gpu_busy_stop
    say "many streams on $backend: exit $many_rc (many-streams-$backend.log)"
    grep -E ' streams +first audio|host CPU busy|work (live|offline)|batches on' \
      "$out/many-streams-$backend.log" | tee -a "$summary"
    [ "$many_rc" -eq 0 ] || status=1
  done
  if [[ " ${ETUDE_MANY_STREAMS_BACKENDS:-cuda vulkan} " == *" cuda "* ]]; then
    # Issue 41's offline measure: 1,024 streams read with read() on CUDA
    # (ETUDE_OFFLINE_STREAMS), and where their work ran (offline readers
    # keep their chunks on a GPU: engine/scheduling/deadline.h's
    # device_first()).
    gpu_busy_start "$out/gpu-busy-cuda-offline.log"
    many_streams "$out/many-streams-cuda-offline.log" --backend cuda --offline-only \
      --streams "${ETUDE_OFFLINE_STREAMS:-1024}"
    many_rc=$?
    gpu_busy_stop
    say "many streams read offline on cuda: exit $many_rc (many-streams-cuda-offline.log)"
    grep -E 'offline|batches on' "$out/many-streams-cuda-offline.log" | tee -a "$summary"
    [ "$many_rc" -eq 0 ] || status=1
    # CUDA's convolutions as cuBLAS GEMMs (the default) against the direct
    # kernel they replaced (docs/backends.md): the offline aggregate again
    # with ETUDE_CUDA_CONV=direct, at one count.
    ETUDE_CUDA_CONV=direct many_streams "$out/many-streams-cuda-direct.log" --backend cuda \
      --offline-only --streams "${ETUDE_DIRECT_CONV_STREAMS:-64}"
    say "many streams on cuda, direct convolution kernel: exit $? (many-streams-cuda-direct.log)"
    grep -E 'offline|batches on' "$out/many-streams-cuda-direct.log" | tee -a "$summary"
    # TF32 tensor cores for the GEMMs and convolutions (opt-in,
    # --precision tf32), as PyTorch's default "fp32" lets cuDNN use.
    many_streams "$out/many-streams-cuda-tf32.log" --backend cuda --offline-only --precision tf32 \
      --streams "${ETUDE_DIRECT_CONV_STREAMS:-64}"
    say "many streams on cuda in TF32: exit $? (many-streams-cuda-tf32.log)"
    grep -E 'offline|batches on' "$out/many-streams-cuda-tf32.log" | tee -a "$summary"
    # The operations the device is given per second of audio and per batch
    # (each a launch the host pays for; profiling on, so the speed of this
    # run is not one to quote).
    many_streams "$out/many-streams-cuda-ops.log" --backend cuda --offline-only --count-ops \
      --streams "${ETUDE_DIRECT_CONV_STREAMS:-64}"
    say "many streams on cuda, operations counted: exit $? (many-streams-cuda-ops.log)"
    grep -E 'device operations|batches on' "$out/many-streams-cuda-ops.log" | tee -a "$summary"
    # The device's batches on one lane per class across its networks (the
    # default, engine/models/device_lane.h) against a lane per network, as
    # before (ETUDE_DEVICE_LANES=network): pulled in real time, at one
    # count, to set beside the same count in many-streams-cuda.log.
    ETUDE_DEVICE_LANES=network many_streams "$out/many-streams-cuda-lane-per-network.log" \
      --backend cuda --streams "${ETUDE_DIRECT_CONV_STREAMS:-64}"
    say "many streams on cuda, a lane per network: exit $? (many-streams-cuda-lane-per-network.log)"
    grep -E ' streams +first audio|work (live|offline)|batches on' \
      "$out/many-streams-cuda-lane-per-network.log" | tee -a "$summary"
  fi
  # The yardsticks of issue 41 on the same voice and ids: PyTorch eager,
  # whole sentences in one batch, fp32 and fp16 (the weights make_voices.py
  # saved beside the .onnx); ONNX Runtime with a single-thread session per
  # host core. Neither fails the pack: they measure others, not the engine.
  if [ -f "${many_voice%.onnx}.pt" ]; then
    gpu_busy_start "$out/gpu-busy-torch.log"
    timeout "$limit" python3 -B "$files/tools/torch_piper.py" --model "${many_voice%.onnx}.pt" \
      --ids-from "$files/data/piper/reference.json" \
      --batches "${ETUDE_TORCH_BATCHES:-1,16,64,256,1024}" >"$out/torch-piper.log" 2>&1
    torch_rc=$?
    gpu_busy_stop
    say "PyTorch batched on the same voice: exit $torch_rc (torch-piper.log)"
    grep -E 'aggregate|out of memory' "$out/torch-piper.log" | tee -a "$summary"
  else
    say "PyTorch batched: skipped (no full-size voice with its PyTorch weights)"
  fi
  if python3 -c 'import onnxruntime, numpy' 2>/dev/null; then
    timeout "$limit" python3 -B "$files/tools/onnx_sessions.py" --voice "$many_voice" \
      --ids-from "$files/data/piper/reference.json" --streams "${ETUDE_ORT_STREAMS:-64}" \
      --rounds 1 >"$out/onnx-sessions.log" 2>&1
    say "ONNX Runtime, a session per core, on the same voice: exit $? (onnx-sessions.log)"
    grep -E 'streams' "$out/onnx-sessions.log" | tee -a "$summary"
  else
    say "ONNX Runtime sessions: skipped (python3 lacks onnxruntime or numpy)"
  fi
fi

if [ "$status" -eq 0 ]; then say "PASSED"; else say "FAILED"; fi
exit "$status"
