//===- RealNccl.cpp - The real NCCL underneath libcoll_nccl.so ------------===//
//
// The real library, loaded on first use with dlopen(RTLD_DEEPBIND) from
// COLL_NCCL_LIB (default libnccl.so.2), and the table of its functions,
// each wrapped so that the calling thread is marked as inside the real
// library (realDepth) for the length of the call.
//
//===----------------------------------------------------------------------===//

#include "Shim.h"

#include "coll/runtime/Debug.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>

namespace coll::rt::dropin::nccl {

thread_local constinit int realDepth = 0;

namespace {

/// The real library's functions as dlsym gives them; RealNccl holds
/// wrappers of them that mark the calling thread as inside the real
/// library (realDepth) for the length of the call.
#define COLL_NCCL_RAW(name) decltype(&::name) raw_##name = nullptr;
COLL_NCCL_REAL_FUNCTIONS(COLL_NCCL_RAW)
#undef COLL_NCCL_RAW

template <class F> struct Guarded;
template <class R, class... A> struct Guarded<R (*)(A...)> {
  template <R (**Raw)(A...)> static R call(A... args) {
    ++realDepth;
    struct Leave {
      ~Leave() { --realDepth; }
    } leave;
    return (*Raw)(args...);
  }
};

} // namespace

const RealNccl &real() {
  static RealNccl lib;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *env = std::getenv("COLL_NCCL_LIB");
    lib.path = env && *env ? env : "libnccl.so.2";
    // RTLD_DEEPBIND: the real library's own calls to nccl* bind inside it,
    // never to this shim.
    lib.handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib.handle) {
      const char *err = dlerror();
      lib.why = "cannot load the real NCCL (COLL_NCCL_LIB=" + lib.path + "): " +
                (err ? err : "dlopen failed");
      return;
    }
    if (dlsym(lib.handle, "ncclGetVersion") == reinterpret_cast<void *>(&::ncclGetVersion)) {
      lib.why = "COLL_NCCL_LIB=" + lib.path + " is libcoll_nccl.so itself, not the real NCCL";
      dlclose(lib.handle);
      lib.handle = nullptr;
      return;
    }
#define COLL_NCCL_LOAD(name)                                                                   \
  raw_##name = reinterpret_cast<decltype(&::name)>(dlsym(lib.handle, #name));                  \
  if (raw_##name)                                                                              \
    lib.name = &Guarded<decltype(&::name)>::call<&raw_##name>;
    COLL_NCCL_REAL_FUNCTIONS(COLL_NCCL_LOAD)
#undef COLL_NCCL_LOAD
    COLL_LOG(Info, Init, -1, "the real NCCL underneath: " + lib.path);
  });
  return lib;
}

ncclResult_t fromReal(ncclComm_t comm, const char *function, ncclResult_t result) {
  if (result == ncclSuccess || result == ncclInProgress)
    return result;
  const RealNccl &r = real();
  std::string detail = r.ncclGetLastError && comm && comm->real
                           ? r.ncclGetLastError(comm->real)
                           : (r.ncclGetLastError ? r.ncclGetLastError(nullptr) : "");
  return failWith(comm, result,
                  llvm::formatv("{0}: the real NCCL failed ({1}){2}{3}", function,
                                r.ncclGetErrorString ? r.ncclGetErrorString(result) : "",
                                detail.empty() ? "" : ": ", detail));
}

} // namespace coll::rt::dropin::nccl
