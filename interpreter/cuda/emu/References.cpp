//===- emu/References.cpp - device/References.cu compiled for the CPU SIMT launcher ---===//
//
// The very kernel source of the GPU build, compiled as host C++ against the
// host side of device/Hardware.h (COLL_CUDA_EMULATION=1).
//
//===----------------------------------------------------------------------===//

#include "device/References.cu"
