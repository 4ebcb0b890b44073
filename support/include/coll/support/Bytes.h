//===- Bytes.h - Byte counts as people write them ---------------*- C++ -*-===//
//
// One spelling of byte counts everywhere Coll reads or prints one: the
// tuning table, COLL_*_SLOT_BYTES, the tools' --size options, the runtime's
// and colltune's logs. Decimal digits with an optional K, M or G suffix, in
// either case, meaning 2^10, 2^20 and 2^30 as nccl-tests and NCCL's
// environment use them.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SUPPORT_BYTES_H
#define COLL_SUPPORT_BYTES_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace coll {

/// `text` as a byte count ("65536", "64K", "1m", "2G"); nullopt for anything
/// else and for counts above `max`.
std::optional<uint64_t> parseBytes(llvm::StringRef text, uint64_t max = UINT64_MAX / 2);

/// The shortest exact spelling: "0", "3000", "64K", "4M", "1G"; UINT64_MAX
/// (no limit) is "inf".
std::string formatBytes(uint64_t bytes);

} // namespace coll

#endif // COLL_SUPPORT_BYTES_H
