//===- EmbeddedAlgorithms.h - The programs of algorithms/, built in -*- C++ -*-===//
//
// The build embeds every program of algorithms/ (Embed.cmake), so the
// runtime has a default set with nothing configured; a program may be
// embedded a second time with another protocol (CMakeLists.txt's
// COLL_EMBEDDED_PROGRAMS, `FILE:PROTOCOL`).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_EMBEDDEDALGORITHMS_H
#define COLL_RUNTIME_EMBEDDEDALGORITHMS_H

#include <cstddef>

namespace coll::rt {

struct EmbeddedProgram {
  const char *name;     ///< the algorithm's name: the file's stem, or stem_protocol
  const char *file;     ///< the file's stem
  const char *protocol; ///< replaces the program's `option protocol`, or null
  const char *source;   ///< the program text
};

extern const EmbeddedProgram embeddedPrograms[];
extern const size_t numEmbeddedPrograms;

} // namespace coll::rt

#endif // COLL_RUNTIME_EMBEDDEDALGORITHMS_H
