#include "gpu/cpu/openblas_kernels.h"

#include <cblas.h>

namespace etude::gpu::cpu {

std::string openblas_kernels() {
    const char* name = openblas_get_corename();
    return name && *name ? name : "unknown";
}

}  // namespace etude::gpu::cpu
