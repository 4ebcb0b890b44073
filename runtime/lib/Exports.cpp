//===- Exports.cpp - libcoll.so -------------------------------------------===//
//
// libcoll.so is CollRuntime linked whole; coll.map keeps only coll* visible.
// This file gives the shared library a translation unit of its own.
//
//===----------------------------------------------------------------------===//

#include "coll.h"
