/*===- CollPlot.h - The plots of tools/support/Plot.h, for C programs -----===*
 *
 * coll-vs-mpi (C, linked against MPI and libcoll.so) draws its sweep with the
 * same writer as collrun and collbench: collect points, then write them.
 *
 *===----------------------------------------------------------------------===*/

#ifndef COLL_TOOLS_COLLPLOT_H
#define COLL_TOOLS_COLLPLOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct collPlotPoint {
  const char *series; /* copied by collPlotWrite */
  int reference;      /* non-zero: drawn dashed */
  uint64_t bytes;
  double seconds;
  double busbw; /* GB/s; 0 when not known */
} collPlotPoint;

/* Writes the points as SVG to `path`; 0 on success, else -1 with a message
 * on stderr naming the path. */
int collPlotWrite(const char *path, const char *title, const collPlotPoint *points, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* COLL_TOOLS_COLLPLOT_H */
