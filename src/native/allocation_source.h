// Who allocated: the label the GPU tracer files an allocation under, from the path of the shared
// object that made it (CUPTI's `source` field, or the calling library read from the stack).
// Pure C++; part of the tracer's reduction library.
#pragma once

#include <string>
#include <string_view>

namespace kbv::native {

// "torch", "cublas", "cudnn", "triton", ..., "ext:<basename>" for another shared object (a
// candidate's extension), "other:<basename>" for the rest, "unknown" for an empty path. Exposed
// to Python as kbv_native._classify_allocation_source.
std::string ClassifyAllocationSource(const std::string& path);

// The file name of a path: what follows the last '/' (the whole path when there is none).
std::string_view PathBasename(std::string_view path);

}  // namespace kbv::native
