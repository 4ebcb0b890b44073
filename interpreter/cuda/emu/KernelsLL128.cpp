//===- emu/KernelsLL128.cpp - device/KernelsLL128.cu compiled for the CPU SIMT launcher ---===//
//
// The very kernel source of the GPU build, compiled as host C++ against the
// host side of device/Hardware.h (COLL_CUDA_EMULATION=1).
//
//===----------------------------------------------------------------------===//

#include "device/KernelsLL128.cu"
