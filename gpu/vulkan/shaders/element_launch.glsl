// What every element-wise shader of the Vulkan backend shares: the
// extensions the kernel dialect needs, the work-group size, and the
// grid-stride loop (the host caps the group count at 65535, the smallest
// maxComputeWorkGroupCount[0] Vulkan allows, and larger sizes loop).
// Each shader's arguments are push constants: buffers as their device
// addresses (uint64_t), then sizes; gpu/vulkan/vulkan_ops.cpp fills the same
// layout from a C++ struct (keep the two in step).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#define ETUDE_GROUP 256
layout(local_size_x = ETUDE_GROUP) in;

uint64_t first_index() {
    return uint64_t(gl_GlobalInvocationID.x);
}

uint64_t grid_stride() {
    return uint64_t(gl_NumWorkGroups.x) * uint64_t(ETUDE_GROUP);
}
