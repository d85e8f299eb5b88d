// The CPU device names the OpenBLAS kernels it runs (gpu/cpu/openblas_kernels.h).
#include "gpu/cpu/openblas_kernels.h"

#include <gtest/gtest.h>

#include "gpu/cpu/cpu_backend.h"

namespace etude::gpu::cpu {
namespace {

TEST(OpenBlasKernels, the_cpu_device_names_the_kernels_openblas_runs) {
    const std::string kernels = openblas_kernels();
    ASSERT_FALSE(kernels.empty());
    CpuBackend cpu;
    EXPECT_EQ(cpu.info().platform, "FFTW3 + OpenBLAS (" + kernels + " kernels)");
}

}  // namespace
}  // namespace etude::gpu::cpu
