//===- Printer.h - Stable text dump of an algorithm -------------*- C++ -*-===//
//
// A compact, human-readable and deterministic listing of an algorithm, one
// line per step, for FileCheck tests and for people reading an IR.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_PRINTER_H
#define COLL_IR_PRINTER_H

#include "coll/ir/Algorithm.h"

#include "llvm/Support/raw_ostream.h"

namespace coll::ir {

void printAlgorithm(const Algorithm &alg, llvm::raw_ostream &os);

} // namespace coll::ir

#endif // COLL_IR_PRINTER_H
