#!/usr/bin/env bash
# scripts.gpu_pack_is_self_contained: packs the CUDA checks into a temporary
# folder and proves that the folder can travel to a GPU machine that has none
# of our Debian packages:
#  - with a cleared environment and only the pack's lib/ on the library path
#    (what run.sh sets), every file in the pack resolves every library it
#    needs either inside the pack or to glibc, or names one of the CUDA
#    libraries the GPU machine provides (driver, cuFFT, cuBLAS);
#  - nothing is taken from this machine's library folders;
#  - the whole folder (its payload gzipped) fits, with the repository's
#    own files, in the 64 MiB that travel to a GPU machine;
#  - run.sh starts the packed programs and, without a GPU, says so and
#    exits 0 (with a GPU it runs the checks and must pass);
#  - the same for the many-streams pack (gpu-check.sh pack-streams);
#  - the model layer's CUDA parity tests (Piper voices, neural vocoders)
#    are among those it selects, and so are the Vulkan tests, whose loader
#    travels in the pack.
# Usage: gpu_pack_test.sh SOURCE_DIR BUILD_DIR. Exit 77 (skipped) when the
# build has no CUDA module.
set -uo pipefail
src=$1 build=$2
# What travels to a GPU machine: the repository's files and the pack, 64 MiB
# in all (the device tool's limit); 8 MiB are left for untracked files.
limit_bytes=$(((64 - 8) * 1024 * 1024))

if [ ! -f "$build/gpu/cuda/libetude_cuda.so" ]; then
  echo "SKIPPED: this build has no CUDA module (no nvcc, or -DETUDE_WITH_CUDA=OFF)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# check_pack COMMAND NAME FILE...: packs with `gpu-check.sh COMMAND` into
# $tmp/NAME, checks it as above (the FILEs must be in its payload), and runs
# its run.sh into $tmp/NAME-out.
check_pack() {
  local command=$1 label=$2
  shift 2
  pack=$tmp/$label
  env -i PATH=/usr/bin:/bin "$src/scripts/gpu-check.sh" "$command" "$pack" "$build" || {
    bad "gpu-check.sh $command failed"
    return
  }
  # The payload unpacked as run.sh unpacks it, for the checks of its files.
  files=$tmp/$label-files
  mkdir -p "$files"
  tar -xzf "$pack/payload.tar.gz" -C "$files" || bad "payload.tar.gz does not unpack"

  # Allowed outside the pack: glibc, and the CUDA libraries of the GPU machine.
  glibc='^(libc|libm|libmvec|libdl|libpthread|librt)\.so\.[0-9]+$|^ld-linux'
  cuda='^(libcuda|libcufft|libcublas|libcublasLt)\.so\.[0-9]+$'
  count=0
  for f in "$files"/bin/* "$files"/lib/*.so* "$files"/lib/cxx/*; do
    count=$((count + 1))
    report=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$files/lib:$files/lib/cxx" ldd "$f" 2>&1) ||
      bad "ldd $f: $report"
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      if [[ $name =~ $cuda ]]; then
        [ -e "$files/lib/$name" ] && bad "$name travels although the GPU machine provides it"
        continue
      fi
      if [ "$path" = "not" ]; then
        bad "$(basename "$f"): $name not found"
      elif [[ $path == "$files/lib/"* ]]; then  # lib/ or lib/cxx/
        :
      elif [[ $name =~ $glibc ]]; then
        :
      else
        bad "$(basename "$f"): $name comes from $path, outside the pack"
      fi
    done <<<"$report"
  done
  [ "$count" -ge 2 ] || bad "only $count files packed"
  for f in run.sh pack.env payload.tar.gz; do
    [ -e "$pack/$f" ] || bad "$f missing from the pack"
  done
  for f in "$@"; do
    [ -e "$files/$f" ] || bad "$f missing from the pack's payload"
  done

  size=$(du -sb "$pack" | cut -f1)
  tracked=0
  if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    tracked=$(cd "$src" && git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  fi
  echo "$label: $count programs and libraries, $size bytes; the repository's files: $tracked bytes"
  [ $((size + tracked)) -lt "$limit_bytes" ] ||
    bad "the pack ($size bytes) and the repository's files ($tracked) are over $limit_bytes"

  output=$(env -i PATH=/usr/bin:/bin "$pack/run.sh" "$tmp/$label-out" 2>&1)
  rc=$?
  echo "$output"
  if env -i PATH=/usr/bin:/bin nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    [ "$rc" -eq 0 ] || bad "run.sh on this GPU machine exited $rc"
    grep -q '^PASSED' "$tmp/$label-out/summary.txt" || bad "run.sh did not pass on this GPU machine"
  else
    [ "$rc" -eq 0 ] || bad "run.sh without a GPU exited $rc, not 0"
    grep -q 'no NVIDIA GPU on this machine' <<<"$output" || bad "run.sh did not say there is no GPU"
  fi
}

check_pack pack pack bin/etude_tests_gpu bin/etude_tests_engine_models bin/etude_bench \
  lib/libetude_cuda.so lib/libvulkan.so.1 data/piper/reference.json data/neural
# The many-streams pack: its program (which links the whole engine) with a
# test voice, its phoneme ids and the voice maker; it starts from the pack.
check_pack pack-streams streams bin/etude_many_streams lib/libetude_cuda.so lib/libvulkan.so.1 \
  data/piper/test_medium.onnx data/piper/reference.json tools/piper_reference/make_voices.py \
  tools/piper_reference/vits.py
grep -q '^etude_many_streams starts' "$tmp/streams-out/summary.txt" ||
  bad "the packed etude_many_streams did not start"
# Both in one folder for one call (pack-all): the tests, the engine's device
# tests and the many-streams run, in the 64 MiB a call carries with the
# repository's files (the pack itself in an ignored folder, named in the
# call's carry, so no reserve for untracked files). When the repository
# grows past that, this fails: shrink the folder, or drop pack-all.
limit_bytes=$((64 * 1024 * 1024))
check_pack pack-all all bin/etude_tests_gpu bin/etude_tests_engine_models bin/etude_tests_engine \
  bin/etude_many_streams lib/libetude_cuda.so lib/libvulkan.so.1 data/piper/test_medium_multi.onnx \
  data/piper/reference.json data/neural tools/piper_reference/make_voices.py tools/torch_piper.py
grep -q '^etude_many_streams starts' "$tmp/all-out/summary.txt" ||
  bad "pack-all's etude_many_streams did not start"
grep -q '^tests selected by .*: [1-9]' "$tmp/all-out/summary.txt" ||
  bad "pack-all's test programs selected no CUDA tests"
grep -q '^Backends/PiperFlowReplay\.' "$tmp/all-out/cuda-engine-tests-list.txt" ||
  bad "pack-all's engine tests list no PiperFlowReplay tests"

# The packed test program started from the pack alone and found CUDA tests.
grep -q '^tests selected by .*: [1-9]' "$tmp/pack-out/summary.txt" ||
  bad "the packed test programs selected no CUDA tests"
# ... among them the Piper voices' and the neural vocoders' CUDA parity.
for suite in VitsParity NeuralVocoder; do
  grep -q "^Backends/$suite\." "$tmp/pack-out/cuda-model-tests-list.txt" ||
    bad "the packed model tests list no $suite tests"
done
# The Vulkan tests are selected too: where lavapipe is installed, the packed
# loader finds it and the parity suite has a vulkan0 instance.
if ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
  grep -q 'vulkan0' "$tmp/pack-out/cuda-tests-list.txt" ||
    bad "the packed backend tests select no Vulkan tests (with lavapipe installed)"
  grep -q '/vulkan ' "$tmp/pack-out/cuda-model-tests-list.txt" ||
    bad "the packed model tests select no Vulkan tests"
fi
exit "$fail"
