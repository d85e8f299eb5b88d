# Cross-building LibEtude for 64-bit ARM Linux (aarch64) on a Debian 12 x86-64
# machine: the compiler of crossbuild-essential-arm64, the libraries of the
# multiarch :arm64 packages (scripts/bootstrap.sh arm64-test installs both), and, where
# qemu-user-static is installed, ctest running each test program through
# qemu-aarch64 (no binfmt registration needed).
#   cmake -S . -B build-arm64 --toolchain cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
find_program(ETUDE_CROSS_CXX aarch64-linux-gnu-g++)
if(NOT ETUDE_CROSS_CXX)
  message(FATAL_ERROR "LibEtude: no aarch64 cross compiler (aarch64-linux-gnu-g++): "
    "apt-get install crossbuild-essential-arm64, or run scripts/bootstrap.sh arm64-test")
endif()
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian's multiarch layout: the :arm64 libraries live in
# /usr/lib/aarch64-linux-gnu beside the host's, their headers in /usr/include
# (and /usr/include/aarch64-linux-gnu, which the cross compiler searches).
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
if(NOT EXISTS /usr/lib/aarch64-linux-gnu/pkgconfig/fftw3f.pc)
  message(FATAL_ERROR "LibEtude: the aarch64 libraries are not installed (no "
    "/usr/lib/aarch64-linux-gnu/pkgconfig/fftw3f.pc): dpkg --add-architecture arm64, then the "
    ":arm64 packages scripts/bootstrap.sh lists (scripts/bootstrap.sh arm64-test does both)")
endif()
# pkg-config must read the :arm64 .pc files only; the host's would link x86
# libraries. The triplet wrapper does that (it sets PKG_CONFIG_LIBDIR).
find_program(ETUDE_CROSS_PKG_CONFIG aarch64-linux-gnu-pkg-config)
if(ETUDE_CROSS_PKG_CONFIG)
  set(PKG_CONFIG_EXECUTABLE ${ETUDE_CROSS_PKG_CONFIG} CACHE FILEPATH "pkg-config for aarch64")
else()
  set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
endif()
# Programs run at build time (glslc, spirv-val, doxygen, python3) are the
# host's; only libraries and headers come from the target.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# The emulator: ctest runs every test program through it, and gtest's test
# discovery lists the tests through it at build time. Without it the test
# programs still build, and each is registered as one test that skips,
# saying why (tests/CMakeLists.txt).
find_program(ETUDE_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(ETUDE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${ETUDE_QEMU_AARCH64})
endif()
