// Where the registry looks for the CUDA module: a module named by
// ETUDE_CUDA_MODULE alone, else first the one beside the program or library
// that holds the registry (the Python package's folder, for the wheel).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gpu/registry.h"

namespace {

namespace fs = std::filesystem;
using etude::gpu::cuda_module_candidates;
using etude::gpu::cuda_module_folder;

TEST(CudaModulePath, a_named_module_is_the_only_candidate) {
    EXPECT_EQ(cuda_module_candidates("/opt/x/libetude_cuda.so", "/site-packages/libetude"),
              std::vector<std::string>{"/opt/x/libetude_cuda.so"});
}

TEST(CudaModulePath, unnamed_the_module_beside_the_library_comes_first) {
    const auto paths = cuda_module_candidates(nullptr, "/site-packages/libetude");
    ASSERT_FALSE(paths.empty());
    EXPECT_EQ(paths.front(), "/site-packages/libetude/libetude_cuda.so");
    EXPECT_EQ(cuda_module_candidates("", "/site-packages/libetude").front(), paths.front());
    EXPECT_GE(paths.size(), 2u);  // then the build tree's and the install prefix's
}

TEST(CudaModulePath, the_folder_is_that_of_the_program_the_registry_is_linked_into) {
    // This test program links the registry statically: its folder is the
    // program's own, as /proc/self/exe tells.
    const std::string folder = cuda_module_folder();
    ASSERT_FALSE(folder.empty());
    EXPECT_TRUE(fs::equivalent(folder, fs::canonical("/proc/self/exe").parent_path())) << folder;
}

}  // namespace
