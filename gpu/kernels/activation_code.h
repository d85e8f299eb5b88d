// gpu::Activation as the ETUDE_ACT_* code of kernel_bodies.h's
// activation_of(): what the OpenCL and Vulkan hosts pass to their kernels.
// Host C++ only (it names gpu::Activation); the bodies themselves stay free
// of our headers.
#pragma once

#include "gpu/backend.h"
#include "gpu/kernels/kernel_bodies.h"

namespace etude::gpu {

inline int activation_code(Activation a) {
    switch (a) {
        case Activation::LeakyRelu:
            return ETUDE_ACT_LEAKY_RELU;
        case Activation::Gelu:
            return ETUDE_ACT_GELU;
        case Activation::Tanh:
            return ETUDE_ACT_TANH;
        case Activation::Exp:
            return ETUDE_ACT_EXP;
        case Activation::Sin:
            return ETUDE_ACT_SIN;
        case Activation::Cos:
            return ETUDE_ACT_COS;
    }
    return -1;
}

}  // namespace etude::gpu
