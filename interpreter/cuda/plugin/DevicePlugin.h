//===- DevicePlugin.h - What libcoll_cuda.so exports ---------------*- C++ -*-===//
//
// The GPU backend as a plugin: the one symbol of libcoll_cuda.so,
// `collDevicePlugin`, returns a table of C functions over cudaBackend()
// (DeviceExecutor.h). Programs that link the CPU emulation, or no CUDA at
// all (libcoll.so, collrun), load it with dlopen (loadDeviceBackend).
//
// Errors cross the boundary as malloc'ed strings, which the caller frees:
// each side links its own LLVM Support, so an llvm::Error made in one would
// be misread in the other. Data cross as the interpreter's C++ types by
// pointer, so both sides must come from one build: the ABI number, the
// sizes of those types and the version are checked when the plugin loads.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICEPLUGIN_H
#define COLL_INTERPRETER_CUDA_DEVICEPLUGIN_H

#include "coll/interpreter/DeviceExecutor.h"

#include <cstddef>
#include <cstdint>

#define COLL_DEVICE_PLUGIN_ABI 17u // 17: FoldedCopy on fused puts; 16: fused signals and waits (Plan::memberSignals); 15: CudaOptions::copyEngineBytes, CallResult::copyEngineCopies; 14: fused puts (PlanStep::nsrc destinations), FoldedCopy; 13: Plan::deps (PlanStep::depTb < -1); 12: CudaOptions::hostStop; 11: PlanStepPeer::members, Plan::memberPeers; 10: the shared-memory functions; 9: setPeerWindows; 8: setPeerBuffers, ConnectionExport::signals; 7: Plan::signals, Plan::stepPeers; 6: PlanConnection::atReceiver, Plan::connectionsInto

extern "C" {

struct CollDevicePlugin {
  uint32_t abi; ///< COLL_DEVICE_PLUGIN_ABI
  /// sizeof of the types passed: Plan, CallArgs, CudaOptions, ConnectionExport, CudaDeviceInfo
  uint32_t planSize, argsSize, optionsSize, exportSize, infoSize;
  /// ... and of a plan's records, which the kernel reads: PlanTb, PlanStep, CallSlice
  uint32_t tbSize, stepSize, sliceSize;
  const char *version; ///< COLL_VERSION of the build

  // The backend. Every function returning int returns 0 on success, else 1
  // with `*error`.
  /// The CUDA devices this process sees (cudaGetDeviceCount).
  int (*deviceCount)(int *count, char **error);
  /// "NAME (CUDA device N)", malloc'ed; null with `*error`.
  char *(*describe)(int device, char **error);
  int (*currentDevice)(coll::interp::CudaDeviceInfo *out, char **error);
  /// An executor of `plan` on CUDA device `device`; null with `*error`.
  void *(*create)(const coll::interp::Plan *plan, const coll::interp::CudaOptions *options,
                  int device, char **error);
  /// DeviceBackend::stage; null with `*error`.
  void *(*stage)(const coll::interp::CallArgs *host, uint64_t inputBytes, uint64_t outputBytes,
                 char **error);
  const coll::interp::CallArgs *(*stagedArgs)(void *staged);
  int (*upload)(void *staged, char **error);
  int (*download)(void *staged, char **error);
  void (*unstage)(void *staged);
  int (*timeDeviceCopy)(uint64_t bytes, unsigned warmup, unsigned iters,
                        std::vector<double> *seconds, char **error);
  /// DeviceBackend::timeReference.
  int (*timeReference)(const coll::interp::ReferenceRequest *request,
                       std::vector<double> *seconds, char **error);
  /// DeviceBackend::copyOnStream.
  int (*copyOnStream)(void *dst, const void *src, uint64_t bytes, void *stream, int device,
                      char **error);

  // An executor (DeviceExecutor's functions).
  void (*destroy)(void *executor);
  uint64_t (*sliceElems)(void *executor, int type);
  void (*device)(void *executor, coll::interp::CudaDeviceInfo *out);
  int (*run)(void *executor, const coll::interp::CallArgs *args,
             coll::interp::CallResult *result, char **error);
  /// A coll::interp::Timeline of the same build, or null.
  void (*setTimeline)(void *executor, void *timeline);
  int (*prepare)(void *executor, const coll::interp::CallArgs *args,
                 coll::interp::CallResult *result, char **error);
  int (*launch)(void *executor, void *stream, char **error);
  int (*finish)(void *executor, void *stream, char **error);
  int (*enqueue)(void *executor, void *stream, const coll::interp::DeviceCopy *before,
                 size_t nbefore, const coll::interp::DeviceCopy *after, size_t nafter,
                 char **error);
  int (*join)(void *executor, void *stream, char **error);
  /// `*done`: 1 when everything enqueued has ended.
  int (*poll)(void *executor, int wait, int *done, char **error);
  int (*temporary)(void *executor, int which, uint64_t bytes, void **out, char **error);
  int (*abort)(void *executor, char **error);
  void (*traceEnqueued)(void *executor, int on);
  /// DeviceExecutor::collectEnqueued into `timeline` (a Timeline of the same
  /// build, which the caller guards); `t0ns`, `t1ns`: the steady clock's
  /// nanoseconds.
  int (*collectEnqueued)(void *executor, void *timeline, int type, int64_t t0ns, int64_t t1ns,
                         char **error);
  int (*timeLaunches)(void *executor, unsigned warmup, unsigned iters, int graph,
                      std::vector<double> *seconds, char **error);
  void (*exportConnections)(void *executor, coll::interp::ConnectionExport *out);
  int (*placeConnections)(void *executor, const coll::interp::ConnectionExport *all, size_t n,
                          char **error);
  int (*importConnections)(void *executor, const coll::interp::ConnectionExport *all, size_t n,
                           char **error);
  void (*launchShape)(void *executor, coll::interp::LaunchShape *out);
  /// DeviceExecutor::proxiedConnections: the count; the first `capacity`
  /// of them into `out`.
  size_t (*proxiedConnections)(void *executor, coll::interp::ProxiedConnection *out,
                               size_t capacity);
  /// DeviceExecutor::setPeerBuffers: `n` entries, one per rank.
  int (*setPeerBuffers)(void *executor, const coll::interp::PeerBuffers *ranks, size_t n,
                        char **error);
  /// DeviceBackend's shared memory: allocateShared (null with `*error`),
  /// freeShared, exportShared, openShared (null with `*error`), closeShared.
  void *(*allocateShared)(uint64_t bytes, int device, char **error);
  int (*freeShared)(void *base, int device, char **error);
  int (*exportShared)(void *base, int device, coll::interp::SharedHandle *out, char **error);
  void *(*openShared)(const coll::interp::SharedHandle *handle, int device, char **error);
  int (*closeShared)(void *mapped, int device, char **error);
  /// DeviceExecutor::setPeerWindows: `n` entries, one per rank.
  int (*setPeerWindows)(void *executor, const coll::interp::PeerWindows *ranks, size_t n,
                        char **error);
};

typedef const CollDevicePlugin *(*CollDevicePluginEntry)();

} // extern "C"

#endif // COLL_INTERPRETER_CUDA_DEVICEPLUGIN_H
