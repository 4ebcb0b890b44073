//===- Fiber.cpp - Stackful coroutines for waits that yield ---------------===//
//
// x86-64: a switch pushes the six callee-saved integer registers and the
// SSE/x87 control words on the current stack, stores the stack pointer,
// loads the other one and pops the same in reverse. A new fiber's stack is
// prepared to look as if it had been switched away from just before
// `coll_fiber_start`, which calls Fiber::trampoline with the Fiber in %rbx.
//
//===----------------------------------------------------------------------===//

#include "coll/interpreter/host/Fiber.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define COLL_FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLL_FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define COLL_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COLL_FIBER_ASAN 1
#endif
#endif

#if COLL_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if COLL_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
#define COLL_FIBER_ASM 1
extern "C" void coll_fiber_switch(void **save, void *to);
extern "C" void coll_fiber_start();
// Frame, from the saved stack pointer up: MXCSR and x87 control word (8
// bytes), r15, r14, r13, r12, rbx, rbp, return address.
asm(R"(
  .text
  .globl coll_fiber_switch
  .hidden coll_fiber_switch
  .type coll_fiber_switch,@function
coll_fiber_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size coll_fiber_switch,.-coll_fiber_switch

  .globl coll_fiber_start
  .hidden coll_fiber_start
  .type coll_fiber_start,@function
coll_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %rbx, %rdi
  callq *%r12
  ud2
  .cfi_endproc
  .size coll_fiber_start,.-coll_fiber_start
)");
#else
#include <ucontext.h>
#endif

namespace coll::interp::host {

namespace {
thread_local std::atomic<Fiber *> runningFiber{nullptr};

size_t pageSize() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}
} // namespace

class Fiber::Impl {
public:
  ~Impl() {
#if COLL_FIBER_TSAN
    if (tsanFiber)
      __tsan_destroy_fiber(tsanFiber);
#endif
    if (mapping)
      munmap(mapping, mappingBytes);
  }

  void *mapping = nullptr; ///< guard page + stack
  size_t mappingBytes = 0;
  char *stackBottom = nullptr; ///< lowest usable byte
  size_t stackBytes = 0;

#if COLL_FIBER_ASM
  void *sp = nullptr;       ///< the fiber's saved stack pointer
  void *callerSp = nullptr; ///< the resumer's saved stack pointer
  void swapIn() { coll_fiber_switch(&callerSp, sp); }
  void swapOut() { coll_fiber_switch(&sp, callerSp); }
#else
  ucontext_t context{}, caller{};
  void swapIn() { swapcontext(&caller, &context); }
  void swapOut() { swapcontext(&context, &caller); }
#endif

#if COLL_FIBER_TSAN
  void *tsanFiber = nullptr;
  std::atomic<void *> callerTsan{nullptr}; ///< written by the resumer, read by the fiber
  bool isolated = false;
#endif
#if COLL_FIBER_ASAN
  void *fakeStack = nullptr, *callerFakeStack = nullptr;
  const void *callerBottom = nullptr;
  size_t callerBytes = 0;
#endif

  /// Switches from the resumer into the fiber and back.
  void enter() {
#if COLL_FIBER_TSAN
    callerTsan.store(__tsan_get_current_fiber(), std::memory_order_relaxed);
    __tsan_switch_to_fiber(tsanFiber, 0);
#endif
#if COLL_FIBER_ASAN
    __sanitizer_start_switch_fiber(&callerFakeStack, stackBottom, stackBytes);
#endif
    swapIn();
#if COLL_FIBER_ASAN
    __sanitizer_finish_switch_fiber(callerFakeStack, nullptr, nullptr);
#endif
  }

  /// Switches from the fiber to its resumer; `exiting` when it never comes
  /// back (its entry returned).
  void leave(bool exiting) {
#if COLL_FIBER_TSAN
    // 1 is __tsan_switch_to_fiber_no_sync: an isolated fiber's yield hands
    // nothing over; its end does (the resumer then sees all it did).
    __tsan_switch_to_fiber(callerTsan.load(std::memory_order_relaxed),
                           isolated && !exiting ? 1u : 0u);
#endif
#if COLL_FIBER_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &fakeStack, callerBottom, callerBytes);
#endif
    swapOut();
    arrived();
  }

  /// To be called first thing whenever the fiber starts or continues.
  void arrived() {
#if COLL_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fakeStack, &callerBottom, &callerBytes);
#endif
  }
};

llvm::Expected<std::unique_ptr<Fiber>> Fiber::create(size_t stackBytes, bool isolated) {
#if COLL_FIBER_TSAN || COLL_FIBER_ASAN
  stackBytes *= 4; // instrumented frames are larger
#endif
  const size_t page = pageSize();
  stackBytes = (std::max<size_t>(stackBytes, 16 << 10) + page - 1) / page * page;
  std::unique_ptr<Fiber> fiber(new Fiber());
  fiber->impl = std::make_unique<Impl>();
  Impl &impl = *fiber->impl;
  impl.mappingBytes = stackBytes + page;
  void *mapping = mmap(nullptr, impl.mappingBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    std::error_code code(errno, std::generic_category());
    return llvm::createStringError(code, "cannot map a fiber stack of %zu bytes: %s",
                                   stackBytes, code.message().c_str());
  }
  impl.mapping = mapping;
  if (mprotect(mapping, page, PROT_NONE) != 0) {
    std::error_code code(errno, std::generic_category());
    return llvm::createStringError(code, "cannot protect a fiber's guard page: %s",
                                   code.message().c_str());
  }
  impl.stackBottom = static_cast<char *>(mapping) + page;
  impl.stackBytes = stackBytes;
#if COLL_FIBER_TSAN
  impl.tsanFiber = __tsan_create_fiber(0);
  impl.isolated = isolated;
#else
  (void)isolated;
#endif
  return fiber;
}

Fiber::~Fiber() {
  assert(state.load(std::memory_order_relaxed) != State::Running && "destroying a running fiber");
}

void Fiber::trampoline(Fiber *self) {
  self->impl->arrived();
  self->entry(self->arg);
  self->state.store(State::Finished, std::memory_order_relaxed);
  self->impl->leave(/*exiting=*/true);
  __builtin_unreachable();
}

void Fiber::reset(Entry fn, void *fnArg) {
  assert(state.load(std::memory_order_relaxed) != State::Running &&
         state.load(std::memory_order_relaxed) != State::Suspended &&
         "resetting a fiber that is in the middle of its entry");
  entry = fn;
  arg = fnArg;
  state.store(State::Ready, std::memory_order_relaxed);
  Impl &i = *impl;
  char *top = i.stackBottom + i.stackBytes; // page aligned, so 16-byte aligned
#if COLL_FIBER_ASM
  auto *frame = reinterpret_cast<uint64_t *>(top - 80);
  uint32_t mxcsr = 0x1F80;  // all exceptions masked, round to nearest
  uint16_t fpcw = 0x037F;   // the x87 default
  std::memset(frame, 0, 80);
  std::memcpy(frame, &mxcsr, 4);
  std::memcpy(reinterpret_cast<char *>(frame) + 4, &fpcw, 2);
  frame[4] = reinterpret_cast<uint64_t>(&Fiber::trampoline); // r12
  frame[5] = reinterpret_cast<uint64_t>(this);               // rbx
  frame[6] = 0;                                              // rbp
  frame[7] = reinterpret_cast<uint64_t>(&coll_fiber_start);  // return address
  i.sp = frame;
#else
  getcontext(&i.context);
  i.context.uc_stack.ss_sp = i.stackBottom;
  i.context.uc_stack.ss_size = i.stackBytes;
  i.context.uc_link = nullptr;
  // makecontext passes int arguments: split the pointer in two.
  auto bits = reinterpret_cast<uintptr_t>(this);
  makecontext(&i.context,
              reinterpret_cast<void (*)()>(+[](unsigned hi, unsigned lo) {
                trampoline(reinterpret_cast<Fiber *>((uintptr_t(hi) << 32) | lo));
              }),
              2, unsigned(bits >> 32), unsigned(bits));
#endif
}

bool Fiber::resume() {
  assert((state.load(std::memory_order_relaxed) == State::Ready ||
          state.load(std::memory_order_relaxed) == State::Suspended) &&
         "resuming a fiber that is not ready");
  Fiber *outer = runningFiber.load(std::memory_order_relaxed);
  runningFiber.store(this, std::memory_order_relaxed);
  state.store(State::Running, std::memory_order_relaxed);
  impl->enter();
  runningFiber.store(outer, std::memory_order_relaxed);
  return state.load(std::memory_order_relaxed) == State::Finished;
}

void Fiber::yield() {
  Fiber *self = runningFiber.load(std::memory_order_relaxed);
  assert(self && "yield outside a fiber");
  self->state.store(State::Suspended, std::memory_order_relaxed);
  self->impl->leave(/*exiting=*/false);
  // Resumed: resume() has set the state and runningFiber again.
}

Fiber *Fiber::current() { return runningFiber.load(std::memory_order_relaxed); }

} // namespace coll::interp::host
