# shellcheck shell=bash disable=SC2154  # sourced by scripts/bootstrap.sh, which sets here, build_dir, jobs, arm64_dir, arm64_wheel_packages and wheel_policy
# The Python wheel for 64-bit ARM (aarch64), cross-built on an amd64 Debian
# machine, and its tests under qemu: `scripts/bootstrap.sh arm64-wheel`
# (docs/python.md, "64-bit ARM"). Sourced by scripts/bootstrap.sh, whose
# variables (here, build_dir, jobs, arm64_dir, wheel_policy) and functions (arm64_prepare,
# arm64_build, install_missing, repair_wheel) it uses.
#
# What runs where:
# - the build runs on the host: the host's Python runs pip, scikit-build-core
#   and CMake (BUILD/python-build-env, as python_package makes it), CMake
#   compiles with the aarch64 toolchain file, and pyconfig.h and the standard
#   library are those of Debian's libpython3.X-dev:arm64;
# - the target's interpreter, python3.X from Debian's python3.X-minimal:arm64,
#   is unpacked into BUILD-arm64/python-root (it cannot be installed beside
#   the host's: both are /usr/bin/python3.X), and qemu-aarch64 runs it. It
#   writes the extension's type stubs during the build and runs the tests;
# - the wheel is tagged linux_aarch64 (_PYTHON_HOST_PLATFORM) with the
#   target's extension suffix (SETUPTOOLS_EXT_SUFFIX, asked of the target's
#   interpreter): the variables scikit-build-core reads when cross-compiling;
# - auditwheel, on the host (it reads aarch64 ELF files and finds Debian's
#   :arm64 libraries through /etc/ld.so.conf.d), makes it manylinux as
#   python_package does the native one (repair_wheel); the repaired wheel is
#   the one installed and tested.
#
# Where PyPI cannot be reached (scikit-build-core, nanobind, the tests'
# packages) it says so and skips, as the native package's tests do; a wheel
# that does not build or a test that fails is a failure.
#
# Outputs, all under BUILD-arm64 (the aarch64 build folder):
#   python-wheel-raw/libetude-*-linux_aarch64.whl    the wheel as built
#   python-dist/libetude-*-manylinux_*_aarch64.whl   the wheel repaired (repair_wheel)
#   python-wheel/                              its CMake folder, kept: a second build is incremental
#   python-site/                               the wheel and the tests' packages (aarch64 wheels
#                                              from PyPI), installed by the host's pip
#   python-env/bin/python                      the target's interpreter through qemu, as the tests'
#                                              sys.executable (python/tests/run_tests.sh runs it)

# The tests' packages for the target: python/test-requirements.txt less the
# framework adapters (pipecat-ai, livekit-agents), whose dependency trees
# (aiohttp, livekit's native library, ...) would add minutes of download and
# emulated import for two modules of plain Python over the same binding,
# tested natively; their tests skip here, saying that the adapter is not
# installed. With them pytest-xdist, which runs the tests one per core
# (arm64_wheel): emulated, they time nothing (those that would skip there,
# saying so), and one emulated pytest leaves a core idle for minutes.
arm64_test_requirements() {
  grep -vE '^(pipecat-ai|livekit-agents)' "$here/python/test-requirements.txt"
  echo "pytest-xdist==3.8.0"
}

# arm64_python PY: unpacks Debian's PY-minimal:arm64 (the interpreter only;
# its standard library is libpython3.X-stdlib:arm64, installed) into
# BUILD-arm64/python-root, at the version of the installed standard library.
arm64_python() {
  local py=$1 root=$arm64_dir/python-root version
  version=$(dpkg-query -W -f='${Version}' "lib$py-minimal:arm64")
  [ -x "$root/usr/bin/$py" ] && [ "$(cat "$root/VERSION" 2>/dev/null)" = "$version" ] && return 0
  local tmp; tmp=$(mktemp -d)
  chmod 755 "$tmp" # apt-get download runs as _apt where it can
  if ! (cd "$tmp" && apt-get download -q "$py-minimal:arm64=$version") >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    echo "bootstrap: could not download $py-minimal:arm64 $version (the target's interpreter)" >&2
    exit 1
  fi
  rm -rf "$root"
  dpkg -x "$tmp"/"$py"-minimal_*_arm64.deb "$root"
  echo "$version" >"$root/VERSION"
  rm -rf "$tmp"
}

# arm64_python_env QEMU PY: BUILD-arm64/python-env/bin/python, the target's
# interpreter through qemu, with the packages of python-site and not the
# host's (-S: Debian's dist-packages hold x86-64 builds). It passes itself to
# qemu as argv[0] (-0), so that it is also the interpreter's sys.executable
# and a test that starts `sys.executable -c ...` runs through qemu too (no
# binfmt). The emulated process sees no device driver, as the emulated C++
# suite does (tests/CMakeLists.txt), and ETUDE_UNDER_EMULATION tells the
# timed tests to skip.
arm64_python_env() {
  local qemu=$1 py=$2 env=$arm64_dir/python-env
  rm -rf "$env"
  mkdir -p "$env/bin" "$env/no-opencl-drivers"
  echo '{"file_format_version": "1.0.0", "ICD": {"library_path": "/nonexistent/no-vulkan-driver.so", "api_version": "1.0.0"}}' \
    >"$env/no-vulkan-driver.json"
  cat >"$env/bin/python" <<EOF
#!/bin/sh
# The aarch64 $py through qemu (scripts/arm64-wheel.sh, arm64_python_env).
PYTHONPATH="$arm64_dir/python-site" ETUDE_UNDER_EMULATION=qemu \\
VK_ICD_FILENAMES="$env/no-vulkan-driver.json" OCL_ICD_VENDORS="$env/no-opencl-drivers" \\
  exec "$qemu" -0 "\$0" "$arm64_dir/python-root/usr/bin/$py" -S "\$@"
EOF
  # The etude program of BUILD-arm64 through qemu, in the same surroundings.
  cat >"$env/bin/etude" <<EOF
#!/bin/sh
# The aarch64 etude through qemu (scripts/arm64-wheel.sh, arm64_python_env).
ETUDE_UNDER_EMULATION=qemu VK_ICD_FILENAMES="$env/no-vulkan-driver.json" OCL_ICD_VENDORS="$env/no-opencl-drivers" \\
  exec "$qemu" "$arm64_dir/cli/etude" "\$@"
EOF
  chmod +x "$env/bin/python" "$env/bin/etude"
}

arm64_wheel() {
  arm64_prepare "${arm64_wheel_packages[@]}"
  local qemu py build_env=$build_dir/python-build-env dist=$arm64_dir/python-dist
  local site=$arm64_dir/python-site log=$arm64_dir/python-wheel.log suffix raw=$arm64_dir/python-wheel-raw
  qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
  if [ -z "$qemu" ]; then
    echo "bootstrap: no qemu-aarch64 (apt-get install qemu-user-static): the wheel cannot be built (its type stubs import it) nor tested" >&2
    exit 1
  fi
  py=$(/usr/bin/python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
  # The etude program and C library the tests compare the binding with
  # (ETUDE_BIN, ETUDE_C_LIBRARY); incremental after arm64-test.
  arm64_build etude etude_shared
  arm64_python "$py"
  arm64_python_env "$qemu" "$py"
  suffix=$("$arm64_dir/python-env/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  rm -rf "$dist" "$site" "$raw"
  : >"$log"
  if ! { [ -x "$build_env/bin/python" ] || /usr/bin/python3 -m venv "$build_env"; } >>"$log" 2>&1 ||
     ! "$build_env/bin/pip" install -q --disable-pip-version-check \
         -r "$here/python/build-requirements.txt" >>"$log" 2>&1; then
    tail -5 "$log" >&2
    echo "bootstrap: SKIP: could not install python/build-requirements.txt from PyPI into $build_env; no aarch64 wheel was built" >&2
    return 0
  fi
  # The host's pip installs aarch64 wheels for the target (--platform): the
  # emulated pip would take minutes. manylinux_2_28 and manylinux2014 cover
  # numpy's aarch64 wheels (pip 23 does not widen a newer manylinux tag to
  # the older ones). The tests' packages go first: the type stubs, made
  # during the build, import numpy.
  local target=(--platform "${wheel_policy}_aarch64" --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64
                --implementation cp --python-version "${py#python}"
                --abi "cp$(echo "${py#python}" | tr -d .)" --only-binary=:all:)
  if ! "$build_env/bin/pip" install -q --disable-pip-version-check --target "$site" "${target[@]}" \
         -r <(arm64_test_requirements) >>"$log" 2>&1; then
    tail -5 "$log" >&2
    echo "bootstrap: SKIP: could not install the tests' aarch64 packages from PyPI into $site; no aarch64 wheel was built" >&2
    return 0
  fi
  # The extension from the cross-build's own layers (python/CMakeLists.txt,
  # as python_package does natively): the host's Python for the headers
  # (Debian's pyconfig.h dispatches to the aarch64 one by the compiler's
  # multiarch include path), the target's suffix for the module's name
  # (SKBUILD_SOABI, which nanobind takes as scikit-build-core would pass
  # it), the target's interpreter for the stubs; then a wheel that packs it.
  local soabi=${suffix#.} include
  soabi=${soabi%.so}
  include=$("$build_env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  if ! { cmake -S "$here" -B "$arm64_dir" -DETUDE_BUILD_PYTHON_MODULE=ON \
             -DPython_EXECUTABLE="$build_env/bin/python" -DPython_INCLUDE_DIR="$include" \
             -DSKBUILD_SOABI="$soabi" \
             -DETUDE_TARGET_PYTHON="$arm64_dir/python-env/bin/python" &&
           cmake --build "$arm64_dir" -j"$jobs" --target _native_stub; } >>"$log" 2>&1 ||
     ! _PYTHON_HOST_PLATFORM=linux-aarch64 SETUPTOOLS_EXT_SUFFIX="$suffix" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
       "$build_env/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
         --config-settings=build-dir="$arm64_dir/python-wheel" \
         --config-settings=cmake.define.CMAKE_TOOLCHAIN_FILE="$here/cmake/toolchains/aarch64-linux-gnu.cmake" \
         --config-settings=cmake.define.ETUDE_PREBUILT_MODULE_DIR="$arm64_dir/python-module" \
         -w "$raw" "$here/python" >>"$log" 2>&1 ||
     ! repair_wheel aarch64 "$raw" "$dist" >>"$log" 2>&1 ||
     ! "$build_env/bin/pip" install -q --disable-pip-version-check --target "$site" "${target[@]}" \
         --no-deps "$dist"/libetude-*.whl >>"$log" 2>&1; then
    grep -E "error|Error" "$log" | head -30 >&2 || tail -30 "$log" >&2
    echo "bootstrap: the aarch64 wheel did not build or repair to ${wheel_policy}_aarch64 (log: $log)" >&2
    exit 1
  fi
  echo "bootstrap: built $(basename "$dist"/libetude-*.whl) into $dist"
  echo "bootstrap: the aarch64 wheel's tests, under qemu, one per core"
  ETUDE_BIN=$arm64_dir/python-env/bin/etude ETUDE_C_LIBRARY=$(readlink -f "$arm64_dir/libetude.so") \
    sh "$here/python/tests/run_tests.sh" "$arm64_dir" -n "$jobs"
}
