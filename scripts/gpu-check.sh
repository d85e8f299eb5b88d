#!/usr/bin/env bash
# GPU checks in one folder, for a machine that has an NVIDIA GPU but none of
# our Debian packages and no network:
#   scripts/gpu-check.sh pack DIR [BUILD_DIR]
# writes DIR with the CUDA and Vulkan tests (the backends', and the model
# layer's parity tests with their reference data) and benchmarks, the CUDA
# backend module, the Vulkan loader and every shared library they need from
# this build machine, in
# DIR/payload.tar.gz beside DIR/run.sh and DIR/pack.env; then, on the GPU
# machine,
#   DIR/run.sh OUT
# runs them and writes the results under OUT (see docs/backends.md).
#   scripts/gpu-check.sh pack-streams DIR [BUILD_DIR]
# packs the many-streams benchmark the same way, alone: the whole engine it
# links (ICU, espeak-ng, Flite's voices) would not fit in the first pack.
#   scripts/gpu-check.sh pack-all DIR [BUILD_DIR]
# packs the tests of both (the engine's device tests too) and the
# many-streams benchmark, not the kernel benchmarks, in one folder that
# travels with the repository in one call (the libraries are shared; the
# programs are stripped); it refuses to pack what would not travel.
# BUILD_DIR defaults to $ETUDE_BUILD_DIR or build/; it must hold
# etude_tests_gpu, etude_tests_engine_models, etude_bench (pack),
# etude_many_streams (pack-streams), the first two, etude_tests_engine and
# etude_many_streams (pack-all), and gpu/cuda/libetude_cuda.so.
set -euo pipefail

# Which tests and benchmarks are the GPU ones: the only place to change
# when test or benchmark names change. gtest filter: suites named Cuda*
# and every parameterised instance whose device name says cuda or vulkan
# (the backend parity suite's .../cuda0 and .../vulkan0), so that one run
# measures CUDA and Vulkan side by side on the same GPU. Benchmark filter: a
# regular expression.
cuda_test_filter='*Cuda*:*cuda*:*vulkan*'
cuda_bench_filter='cuda|Cuda|vulkan'

# Libraries the pack does not carry, by soname prefix.
# - glibc (libc, libm, libmvec, libdl, libpthread, librt, the dynamic loader):
#   it is one unit with the loader of the machine that runs the programs and
#   cannot be swapped under it through LD_LIBRARY_PATH; every Linux system has
#   it. run.sh checks that the machine's glibc is at least the version the
#   packed files ask for (written to DIR/pack.env).
glibc_libs='libc.so libm.so libmvec.so libdl.so libpthread.so librt.so ld-linux linux-vdso'
# Carried although every system has them: libstdc++ and libgcc_s belong to
# GCC, not glibc; ours (GCC 12) may be newer than the target's, and both are
# backward compatible, so carrying them removes a dependency on the target's
# compiler. They go to lib/cxx/: Debian 12's libstdc++ asks for glibc 2.36
# while our programs ask for 2.35, so on a machine with glibc 2.35 (Ubuntu
# 22.04) run.sh uses the machine's own libstdc++ when it is new enough.
cxx_libs='libstdc++.so libgcc_s.so'
# Provided by the GPU machine and too large to travel (64 MB at most):
# libcuda (the driver, loaded by the CUDA runtime that the module links
# statically), cuFFT (287 MB), cuBLAS (54 MB) and cuBLASLt (542 MB) of CUDA 13;
# the toolkit here has no static cuFFT or cuBLAS to link instead. run.sh finds
# them on the GPU machine without assuming a path.
target_libs='libcuda.so libcufft.so libcublas.so libcublasLt.so'
# The Vulkan loader: LibEtude opens it at run time (gpu/vulkan/vulkan_api.h),
# so ldd does not see it; carried because the GPU machine may have NVIDIA's
# driver (whose Vulkan ICD the loader finds) without the loader itself.
# 0.5 MB.
vulkan_loader='libvulkan.so.1'

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

has_prefix() {  # has_prefix NAME "PREFIX..." -> 0 when NAME starts with one of them
  local p
  for p in $2; do [[ $1 == "$p"* ]] && return 0; done
  return 1
}

newest_needed() {  # newest_needed PREFIX FILE... -> newest PREFIX_x.y the files' undefined symbols ask for
  local prefix=$1
  shift
  objdump -T "$@" 2>/dev/null | grep '\*UND\*' | grep -oE "\(${prefix}_[0-9][0-9.]*\)" |
    tr -d '()' | sed "s/^${prefix}_//" | sort -uV | tail -1
}

pack() {
  local kind=$1 dir=$2 build=$3
  local here; here=$(cd "$(dirname "$0")/.." && pwd)
  # The packed programs, then the module: each is copied, and ldd of all of
  # them finds the libraries to carry.
  local programs=("$build/tests/etude_tests_gpu" "$build/tests/etude_tests_engine_models"
                  "$build/bench/etude_bench") targets="etude_tests_gpu etude_tests_engine_models etude_bench"
  if [ "$kind" = streams ]; then
    programs=("$build/bench/etude_many_streams")
    targets=etude_many_streams
  elif [ "$kind" = all ]; then
    programs=("$build/tests/etude_tests_gpu" "$build/tests/etude_tests_engine_models"
              "$build/tests/etude_tests_engine" "$build/bench/etude_many_streams")
    targets="etude_tests_gpu etude_tests_engine_models etude_tests_engine etude_many_streams"
  fi
  local module=$build/gpu/cuda/libetude_cuda.so f
  for f in "${programs[@]}" "$module"; do
    if [ ! -f "$f" ]; then
      echo "gpu-check: $f is missing: build it first (cmake --build $build" \
           "--target $targets etude_cuda)" >&2
      exit 1
    fi
  done
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    echo "gpu-check: $dir exists and is not empty; give a new folder" >&2
    exit 1
  fi
  mkdir -p "$dir/bin" "$dir/lib/cxx"
  cp "${programs[@]}" "$dir/bin/"
  cp "$module" "$dir/lib/"
  # The model parity tests' reference data (the test Piper voices and the
  # small neural vocoders, 6 MB), found through ETUDE_TEST_DATA; the
  # many-streams benchmark takes a test voice and its phoneme ids from it.
  mkdir -p "$dir/data" "$dir/tools"
  cp "$here/scripts/gpu-pack-run.sh" "$dir/run.sh"
  if [ "$kind" = streams ]; then
    # What the many-streams run reads, and no more (the other test voices
    # are 3 MB that the 64 MiB a device call carries, with the repository's
    # files, has no room for): the small test voice, the run's voice where
    # no full-size one can be made, and the phoneme ids.
    mkdir -p "$dir/data/piper"
    cp "$here/tests/data/piper/test_medium.onnx" "$here/tests/data/piper/test_medium.onnx.json" \
       "$here/tests/data/piper/reference.json" "$dir/data/piper/"
  else
    # The tests' data (6 MB), the many-streams run's voice and ids among it.
    cp -r "$here/tests/data/piper" "$here/tests/data/neural" "$dir/data/"
  fi
  if [ "$kind" = main ]; then
    # The neural benchmarks need full-size models; they are made on the GPU
    # machine with its own PyTorch rather than carried (over 100 MB).
    for f in make_parity_data.py convert.py lef.py reference_models.py; do
      cp "$here/tools/$f" "$dir/tools/"
    done
  else
    # The many-streams run's full-size Piper voice is made there too (63 MB).
    mkdir -p "$dir/tools/piper_reference"
    cp "$here/tools/piper_reference/make_voices.py" "$here/tools/piper_reference/vits.py" \
       "$dir/tools/piper_reference/"
    # The yardsticks run beside it on the same voice and ids: PyTorch
    # batched, ONNX Runtime a session per core (torch_piper.py finds vits.py
    # at ../tools/piper_reference from its own folder, here the pack's root).
    cp "$here/bench/torch_piper.py" "$here/bench/onnx_sessions.py" "$dir/tools/"
  fi
  # pack-all: symbols are not needed there, and they are megabytes of the
  # 64 MiB.
  if [ "$kind" = all ]; then strip --strip-unneeded "$dir"/bin/*; fi
  chmod +x "$dir/run.sh"

  # ldd lists the whole closure of each file, so one pass over the programs
  # and the module finds every library; a library that is only dlopen'ed (libcuda by
  # the CUDA runtime, the module by the registry) is not in it.
  local name arrow path rest missing=()
  while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || continue
    if has_prefix "$name" "$glibc_libs" || has_prefix "$name" "$target_libs"; then continue; fi
    if [ "$path" = "not" ]; then
      missing+=("$name")
      continue
    fi
    local to=$dir/lib
    if has_prefix "$name" "$cxx_libs"; then to=$dir/lib/cxx; fi
    [ -f "$to/$name" ] || cp -L "$path" "$to/$name"
  done < <(ldd "${programs[@]}" "$module")
  local loader ldconfig
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  loader=$("$ldconfig" -p 2>/dev/null | awk -v n="$vulkan_loader" '$1 == n && /x86-64/ {print $NF; exit}' || true)
  if [ -z "$loader" ]; then
    missing+=("$vulkan_loader (the libvulkan1 package)")
  else
    cp -L "$loader" "$dir/lib/$vulkan_loader"
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "gpu-check: not found on this machine: ${missing[*]}" >&2
    exit 1
  fi

  # What the GPU machine must provide: the module's CUDA libraries by soname,
  # and a glibc at least as new as the newest symbol version any packed file
  # asks for (with and without lib/cxx/), and what its own libstdc++ and
  # libgcc_s must offer to stand in for ours.
  local needed_cuda others
  needed_cuda=$(readelf -d "$module" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
                while read -r name; do if has_prefix "$name" "$target_libs"; then echo "$name"; fi; done |
                tr '\n' ' ')
  others=("$dir"/bin/* "$dir"/lib/*.so*)
  {
    echo "# Written by scripts/gpu-check.sh pack; read by run.sh."
    echo "pack_kind='$kind'"
    echo "cuda_test_filter='$cuda_test_filter'"
    echo "cuda_bench_filter='$cuda_bench_filter'"
    echo "needed_cuda_libs='${needed_cuda% }'"
    echo "needed_glibc='$(newest_needed GLIBC "${others[@]}" "$dir"/lib/cxx/*)'"
    echo "needed_glibc_without_cxx='$(newest_needed GLIBC "${others[@]}")'"
    echo "needed_glibcxx='$(newest_needed GLIBCXX "${others[@]}")'"
    echo "needed_cxxabi='$(newest_needed CXXABI "${others[@]}")'"
    echo "needed_gcc='$(newest_needed GCC "${others[@]}" "$dir"/lib/cxx/libstdc++*)'"
    echo "packed_from='$(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown)'"
    echo "packed_on='$(date -u +%Y-%m-%dT%H:%M:%SZ) $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")'"
  } >"$dir/pack.env"

  # Everything but run.sh and pack.env travels as one gzipped tar, which
  # run.sh unpacks: the device tool sends the repository's own files (9 MB)
  # with the pack, 64 MiB in all, and unpacked the pack is 60 MB (OpenBLAS
  # alone 36.5 MB, 10.7 MB gzipped). gzip rather than xz: every machine's
  # tar reads it, and it packs in 3 s rather than 20.
  tar -czf "$dir/payload.tar.gz" -C "$dir" bin lib data tools
  rm -rf "${dir:?}/bin" "${dir:?}/lib" "${dir:?}/data" "${dir:?}/tools"
  if [ "$kind" = all ]; then
    # One call carries the repository's tracked files and this folder (in
    # an ignored folder named in the call's carry), 64 MiB in all.
    local size tracked=0 limit=$((64 * 1024 * 1024))
    size=$(du -sb "$dir" | cut -f1)
    if git -C "$here" rev-parse --git-dir >/dev/null 2>&1; then
      tracked=$(cd "$here" && git ls-files -z | xargs -0 stat -c %s 2>/dev/null |
                awk '{s += $1} END {print s + 0}')
    fi
    if [ $((size + tracked)) -ge "$limit" ]; then
      echo "gpu-check: the folder ($size bytes) and the repository's files ($tracked) come to" \
           "$((size + tracked)) bytes, over the $limit a device call carries: use pack and" \
           "pack-streams in two calls" >&2
      exit 1
    fi
    echo "gpu-check: with the repository's files $((size + tracked)) of the $limit bytes a call carries"
  fi
  echo "gpu-check: packed $(du -sh "$dir" | cut -f1) into $dir; on the GPU machine run: $dir/run.sh OUT"
}

case "${1:-}" in
  pack | pack-streams | pack-all)
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    kind=main
    [ "$1" = pack-streams ] && kind=streams
    [ "$1" = pack-all ] && kind=all
    pack "$kind" "$2" "${3:-${ETUDE_BUILD_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}}"
    ;;
  *) usage ;;
esac
