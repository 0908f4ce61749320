// The CUDA backend's entry point, the only place outside backends/cuda that learns whether nexus
// was built with CUDA. Built without nvcc, stub.cc answers instead of the .cu files.
#pragma once

#include "nexus/status.h"

namespace nexus::cuda {

// True when this build has the CUDA backend.
bool built();
// Brings the backend up once (later calls return the first answer): registers CUDA's memory
// functions (core/device_memory.h) when a device is present. An error says why CUDA cannot be
// used: built without CUDA, no driver, no device.
Status init();
// Whether cuBLAS (opened at first use, not linked) and its functions were found; the error names
// the library. Needs no device.
Status blas_status();

}  // namespace nexus::cuda
