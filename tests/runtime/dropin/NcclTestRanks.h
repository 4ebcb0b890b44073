/*===- NcclTestRanks.h - What the forked NCCL test programs share --*- C -*-===*
 *
 * nccl_dropin_check.c, nccl_gpu_check.c and nccl_conformance.c fork their
 * ranks and read what reached the stand-in real NCCL; these are the pieces
 * they share: the stand-in's record of calls, forking the ranks and
 * waiting for them, and the check that nothing of Coll's stayed in
 * /dev/shm.
 *
 *===----------------------------------------------------------------------===*/

#ifndef COLL_TESTS_DROPIN_NCCLTESTRANKS_H
#define COLL_TESTS_DROPIN_NCCLTESTRANKS_H

#include <dirent.h>
#include <signal.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "TimeScale.h"

/* The stand-in's record of calls (the shim has loaded it by now from
 * COLL_NCCL_LIB); "" where the library underneath is not the stand-in. */
static inline const char *standinCalls(void) {
  const char *path = getenv("COLL_NCCL_LIB");
  void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  const char *(*calls)(void) = h ? (const char *(*)(void))dlsym(h, "standinCalls") : NULL;
  return calls ? calls() : "";
}

static inline int countOf(const char *haystack, const char *needle) {
  int n = 0;
  for (const char *p = haystack; (p = strstr(p, needle)); p += strlen(needle))
    ++n;
  return n;
}

/* Forks `n` ranks (1 to 8), each of which runs `rank` (its number, `n`,
 * and a pipe through which rank 0 hands the unique id to the others) under
 * an alarm of `seconds` (times COLL_TEST_TIME_SCALE), so that none outlives
 * a hung test, and exits with what it returns: 0 passed, 77 skipped, else
 * failed. Returns the number of ranks that failed (-1 when no pipe could
 * be made), and in *skipped the number that skipped. */
/* A rank the program kills on purpose (SIGKILL), whose death is its pass
 * (-1: none). */
static int forkVictim = -1;

static inline int forkRanks(int n, int seconds, int (*rank)(int r, int n, int idFd[2]),
                            int *skipped) {
  int idFd[2];
  pid_t pids[8];
  *skipped = 0;
  if (n < 1 || n > 8 || pipe(idFd) != 0)
    return -1;
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm((unsigned)coll_test_scaled(seconds));
      const int status = rank(r, n, idFd);
      fflush(stdout);
      _exit(status);
    }
  }
  int bad = 0;
  *skipped = 0;
  for (int r = 0; r < n; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
      ++*skipped;
    } else if (r == forkVictim && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      /* killed on purpose */
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d ended with status %d\n", r, status);
      ++bad;
    }
  }
  return bad;
}

/* Whether /dev/shm holds a segment of Coll's named `name`. */
static inline int shmHas(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  return access(path, F_OK) == 0;
}

/* The number of Coll's segments left in /dev/shm, each named. Another job
 * of the machine (tests of other build trees run beside these) may hold
 * one for a moment while its ranks set up: a segment counts only if it is
 * still there a second later. */
static inline int shmLeftovers(void) {
  int found = 0;
  DIR *d = opendir("/dev/shm");
  if (!d)
    return 0;
  char names[64][256];
  int seen = 0;
  struct dirent *e;
  while ((e = readdir(d)) && seen < 64)
    if (strncmp(e->d_name, "coll-", 5) == 0)
      snprintf(names[seen++], sizeof names[0], "%s", e->d_name);
  closedir(d);
  if (seen)
    sleep(1);
  for (int i = 0; i < seen; ++i)
    if (shmHas(names[i])) {
      fprintf(stderr, "left in /dev/shm: %s\n", names[i]);
      ++found;
    }
  return found;
}

#endif /* COLL_TESTS_DROPIN_NCCLTESTRANKS_H */
