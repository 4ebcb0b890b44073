//===- Memory.cpp - Memory, registrations and windows of libcoll_nccl.so --===//
//
// ncclMemAlloc gives Coll's GPU memory (collMemAllocDevice) and
// ncclCommWindowRegister registers windows with Coll, so that the calls
// Coll runs on them read and write the peers' buffers in place; what Coll
// cannot allocate or register goes to the real NCCL, and INFO says why.
// Buffer registrations (ncclCommRegister) are the real NCCL's alone: Coll
// needs none.
//
//===----------------------------------------------------------------------===//

#include "Shim.h"

#include "coll/runtime/Debug.h"

#include <memory>

using namespace coll::rt::dropin::nccl;

namespace {

/// A buffer registration: the real NCCL's handle, when it has the comm.
struct Registration {
  ncclComm_t comm;
  void *realHandle;
  void *buff;
  size_t size;
};

/// An ncclWindow_t of this library: Coll's window, or the real NCCL's where
/// Coll refused the buffer.
struct ShimWindow {
  ncclComm_t comm;
  collWindow_t coll;
  ncclWindow_t real;
};

/// The blocks ncclMemAlloc took from Coll (collMemAllocDevice), which
/// ncclMemFree gives back to it; any other pointer is the real NCCL's.
std::mutex collMemoryMutex;
std::set<void *> collMemory;

} // namespace

//===----------------------------------------------------------------------===//
// The API: memory
//===----------------------------------------------------------------------===//

COLL_NCCL_API(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size), (ptr, size)) {
  if (!ptr)
    return failWith(nullptr, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  // Coll's GPU memory on the current device, which Coll's windows hold;
  // the real NCCL's where Coll has none to give (no CUDA device or no GPU
  // backend in this process).
  std::string why;
  if (currentDevice(why) >= 0) {
    void *p = nullptr;
    if (collMemAllocDevice(&p, size, -1) == collSuccess) {
      std::lock_guard<std::mutex> lock(collMemoryMutex);
      collMemory.insert(p);
      *ptr = p;
      return ncclSuccess;
    }
    why = collGetLastError(nullptr);
  }
  if (!real().handle || !real().ncclMemAlloc)
    return failWith(nullptr, ncclInvalidUsage,
                    "ncclMemAlloc: Coll cannot allocate GPU memory here (" + why +
                        ") and the real NCCL " +
                        (real().handle ? "at " + real().path + " lacks ncclMemAlloc"
                                       : "is missing: " + real().why));
  COLL_LOG(Info, Init, -1,
           "ncclMemAlloc: the real NCCL's memory (Coll's windows cannot hold it): " + why);
  return fromReal(nullptr, "ncclMemAlloc", real().ncclMemAlloc(ptr, size));
}

COLL_NCCL_API(ncclResult_t, ncclMemFree, (void *ptr), (ptr)) {
  if (!ptr)
    return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(collMemoryMutex);
    if (collMemory.count(ptr)) {
      if (collResult_t r = collMemFree(ptr); r != collSuccess)
        return failWith(nullptr, toNccl(r),
                        std::string("ncclMemFree: ") + collGetLastError(nullptr));
      collMemory.erase(ptr);
      return ncclSuccess;
    }
  }
  COLL_NEED_REAL(nullptr, ncclMemFree);
  return fromReal(nullptr, "ncclMemFree", real().ncclMemFree(ptr));
}

//===----------------------------------------------------------------------===//
// The API: buffer registration
//===----------------------------------------------------------------------===//

COLL_NCCL_API(ncclResult_t, ncclCommRegister,
              (const ncclComm_t comm, void *buff, size_t size, void **handle),
              (comm, buff, size, handle)) {
  if (!comm || !buff || !handle)
    return failWith(comm, ncclInvalidArgument, "ncclCommRegister: NULL argument");
  // Coll needs no registration; the real NCCL gets it when it has the comm.
  auto reg = std::make_unique<Registration>(Registration{comm, nullptr, buff, size});
  if (comm->real) {
    COLL_NEED_REAL(comm, ncclCommRegister);
    if (ncclResult_t r = real().ncclCommRegister(comm->real, buff, size, &reg->realHandle);
        r != ncclSuccess)
      return fromReal(comm, "ncclCommRegister", r);
  }
  *handle = reg.release();
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle),
              (comm, handle)) {
  if (!comm || !handle)
    return failWith(comm, ncclInvalidArgument, "ncclCommDeregister: NULL argument");
  auto *reg = static_cast<Registration *>(handle);
  if (reg->comm != comm)
    return failWith(comm, ncclInvalidArgument,
                    "ncclCommDeregister: the handle was registered on another communicator");
  ncclResult_t result = ncclSuccess;
  if (reg->realHandle && comm->real && real().ncclCommDeregister)
    result = fromReal(comm, "ncclCommDeregister",
                      real().ncclCommDeregister(comm->real, reg->realHandle));
  delete reg;
  return result;
}

//===----------------------------------------------------------------------===//
// The API: windows
//===----------------------------------------------------------------------===//

COLL_NCCL_API(ncclResult_t, ncclCommWindowRegister,
              (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags),
              (comm, buff, size, win, winFlags)) {
  if (!comm || !win)
    return failWith(comm, ncclInvalidArgument, "ncclCommWindowRegister: NULL argument");
  *win = nullptr;
  // Coll's window first (collective, as NCCL's: every rank registers, and
  // every rank learns when one could not); where Coll refuses it (memory
  // Coll did not allocate, say), on every rank, the real NCCL's.
  std::string collWhy;
  if (comm->coll) {
    collWindow_t w = nullptr;
    const collResult_t r =
        collCommWindowRegister(comm->coll, buff, size, &w, winFlags & NCCL_WIN_COLL_SYMMETRIC);
    if (r == collSuccess) {
      *win = reinterpret_cast<ncclWindow_t>(new ShimWindow{comm, w, nullptr});
      return ncclSuccess;
    }
    collWhy = collGetLastError(comm->coll);
    const char *noReal = !comm->real                         ? "has no communicator here"
                         : !real().ncclCommWindowRegister ? "lacks ncclCommWindowRegister"
                                                            : nullptr;
    if (noReal)
      return failWith(comm, toNccl(r),
                      "ncclCommWindowRegister: Coll refused the window (" + collWhy +
                          ") and the real NCCL " + noReal);
  }
  if (!comm->real)
    return failWith(comm, ncclInvalidUsage,
                    "ncclCommWindowRegister: the communicator has neither a Coll side nor the "
                    "real NCCL's: " + whyNoReal(comm));
  COLL_NEED_REAL(comm, ncclCommWindowRegister);
  ncclWindow_t realWin = nullptr;
  if (ncclResult_t r = fromReal(comm, "ncclCommWindowRegister",
                                real().ncclCommWindowRegister(comm->real, buff, size, &realWin,
                                                              winFlags));
      r != ncclSuccess)
    return r;
  if (!collWhy.empty())
    COLL_LOG(Info, Init, comm->rank,
             "ncclCommWindowRegister: a window of the real NCCL's only (calls on it that Coll "
             "runs copy their buffers): Coll's refused it: " +
                 collWhy);
  *win = reinterpret_cast<ncclWindow_t>(new ShimWindow{comm, nullptr, realWin});
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win),
              (comm, win)) {
  if (!comm || !win)
    return failWith(comm, ncclInvalidArgument, "ncclCommWindowDeregister: NULL argument");
  auto *w = reinterpret_cast<ShimWindow *>(win);
  if (w->comm != comm)
    return failWith(comm, ncclInvalidArgument,
                    "ncclCommWindowDeregister: the window was registered on another communicator");
  if (w->coll) {
    if (collResult_t r = collCommWindowDeregister(comm->coll, w->coll); r != collSuccess)
      return failWith(comm, toNccl(r),
                      std::string("ncclCommWindowDeregister on Coll failed: ") +
                          collGetLastError(comm->coll));
  } else {
    COLL_NEED_REAL(comm, ncclCommWindowDeregister);
    if (ncclResult_t r = fromReal(comm, "ncclCommWindowDeregister",
                                  real().ncclCommWindowDeregister(comm->real, w->real));
        r != ncclSuccess)
      return r;
  }
  delete w;
  return ncclSuccess;
}
