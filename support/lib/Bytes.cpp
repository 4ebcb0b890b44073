//===- Bytes.cpp - Byte counts as people write them -----------------------===//

#include "coll/support/Bytes.h"

namespace coll {

std::optional<uint64_t> parseBytes(llvm::StringRef text, uint64_t max) {
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
    case 'k': case 'K': scale = uint64_t(1) << 10; break;
    case 'm': case 'M': scale = uint64_t(1) << 20; break;
    case 'g': case 'G': scale = uint64_t(1) << 30; break;
    default: break;
    }
    if (scale != 1)
      text = text.drop_back();
  }
  uint64_t value = 0;
  if (text.empty() || text.getAsInteger(10, value) || value > max / scale)
    return std::nullopt;
  return value * scale;
}

std::string formatBytes(uint64_t bytes) {
  if (bytes == UINT64_MAX)
    return "inf";
  for (int shift : {30, 20, 10})
    if (bytes && bytes % (uint64_t(1) << shift) == 0)
      return std::to_string(bytes >> shift) + "GMK"[(30 - shift) / 10];
  return std::to_string(bytes);
}

} // namespace coll
