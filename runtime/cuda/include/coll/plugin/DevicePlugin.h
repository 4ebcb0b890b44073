//===- DevicePlugin.h - What libcoll_cuda.so exports ---------------*- C++ -*-===//
//
// The one symbol of the CUDA plugin, `collDevicePlugin`, returns a table of
// C functions over interp::CudaExecutor. The table passes the interpreter's
// C++ types by pointer, so libcoll.so and the plugin must come from the same
// build: the ABI number and the sizes of those types are checked when the
// plugin is loaded. Errors are malloc'ed strings the caller frees.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_DEVICEPLUGIN_H
#define COLL_RUNTIME_DEVICEPLUGIN_H

#include "coll/interpreter/CudaExecutor.h"

#include <cstddef>
#include <cstdint>

#define COLL_DEVICE_PLUGIN_ABI 2u

extern "C" {

struct CollDevicePlugin {
  uint32_t abi;                                         ///< COLL_DEVICE_PLUGIN_ABI
  uint32_t planSize, argsSize, optionsSize, exportSize; ///< sizeof of the types passed
  const char *version;                                  ///< COLL_VERSION of the build

  /// An executor of `plan` on CUDA device `device`; null with `*error`.
  void *(*create)(const coll::interp::Plan *plan, const coll::interp::CudaOptions *options,
                  int device, char **error);
  void (*destroy)(void *executor);
  void (*exportConnections)(void *executor, coll::interp::ConnectionExport *out);
  int (*importConnections)(void *executor, const coll::interp::ConnectionExport *all, size_t n,
                           char **error);
  int (*prepare)(void *executor, const coll::interp::CallArgs *args, char **error);
  int (*enqueue)(void *executor, void *stream, const coll::interp::DeviceCopy *before,
                 size_t nbefore, const coll::interp::DeviceCopy *after, size_t nafter,
                 char **error);
  int (*join)(void *executor, void *stream, char **error);
  /// `*done`: 1 when everything enqueued has ended.
  int (*poll)(void *executor, int wait, int *done, char **error);
  int (*temporary)(void *executor, int which, uint64_t bytes, void **out, char **error);
  /// "NAME (CUDA device N)", malloc'ed; null with `*error`.
  char *(*describe)(int device, char **error);
  /// The CUDA devices this process sees (cudaGetDeviceCount).
  int (*deviceCount)(int *count, char **error);
  int (*abort)(void *executor, char **error);
  /// CudaExecutor::traceEnqueued.
  int (*traceEnqueued)(void *executor, int on, char **error);
  /// CudaExecutor::collectEnqueued into `timeline` (a coll::interp::Timeline
  /// of the same build, which the caller guards); `t0ns`, `t1ns`: the
  /// steady clock's nanoseconds.
  int (*collectTrace)(void *executor, void *timeline, int type, int64_t t0ns, int64_t t1ns,
                      char **error);
};

typedef const CollDevicePlugin *(*CollDevicePluginEntry)();

} // extern "C"

#endif // COLL_RUNTIME_DEVICEPLUGIN_H
