/*===- Progress.h - A sweep's progress line, on a terminal only ------------===*
 *
 * collrun, collbench and coll-vs-mpi (C) say, while they sweep sizes, which
 * size is running and about how long is left: one line on standard error,
 * rewritten in place with '\r' and cleared before a row of the table is
 * printed and at the end. Only when standard error is a terminal (or, in a
 * process mpirun started, when mpirun's standard output and error are: the
 * line then goes to standard output, in order with the table, since mpirun
 * copies its ranks' two streams separately); otherwise every call does
 * nothing and the output is exactly what it was without it.
 *
 * The time left is the time so far scaled by the work left over the work
 * done, each step weighing what its caller says (collrun: its bytes plus a
 * fixed cost; the benchmarks, which time each point for about as long: 1).
 *
 *===----------------------------------------------------------------------===*/

#ifndef COLL_TOOLS_PROGRESS_H
#define COLL_TOOLS_PROGRESS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct collProgress collProgress;

/* A progress line for `steps` steps weighing `work` in all, prefixed by
 * `tool`; NULL (every call below then does nothing) when standard error is
 * not a terminal. */
collProgress *collProgressStart(const char *tool, size_t steps, double work);
/* Shows that the next step, weighing `work`, is running: "TOOL: WHAT
 * (STEP/STEPS), about T left" ("under 1 s left"; no estimate before a step
 * is done). */
void collProgressStep(collProgress *p, const char *what, double work);
/* Clears the line (before the caller prints); the next step shows it again. */
void collProgressClear(collProgress *p);
/* Clears the line and frees `p`. */
void collProgressEnd(collProgress *p);

#ifdef __cplusplus
}

namespace coll::tools {

/// collProgress for C++: cleared and freed when it goes out of scope.
class Progress {
public:
  Progress(const char *tool, size_t steps, double work)
      : p(collProgressStart(tool, steps, work)) {}
  ~Progress() { collProgressEnd(p); }
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;
  void step(const char *what, double work) { collProgressStep(p, what, work); }
  void clear() { collProgressClear(p); }

private:
  collProgress *p;
};

} // namespace coll::tools
#endif

#endif /* COLL_TOOLS_PROGRESS_H */
