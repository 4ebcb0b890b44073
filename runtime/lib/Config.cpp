//===- Config.cpp - A communicator's settings -------------------------------===//

#include "CommImpl.h"
#include "ProgramCache.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringExtras.h"

#include "coll/support/Bytes.h"

#include <cerrno>
#include <cstdlib>

namespace coll::rt {

namespace {

std::optional<uint64_t> envUnsigned(const char *name, std::string &error) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || !end || *end || text[0] == '-') {
    error = llvm::formatv("{0}={1} is not a non-negative integer", name, text).str();
    return std::nullopt;
  }
  return v;
}

/// A byte count such as 65536 or 64K (parseBytes).
std::optional<uint64_t> envBytes(const char *name, std::string &error) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return std::nullopt;
  std::optional<uint64_t> v = parseBytes(text);
  if (!v)
    error = llvm::formatv("{0}={1} is not a byte count (digits, optionally followed by K, M or G)",
                          name, text)
                .str();
  return v;
}

std::string envString(const char *name) {
  const char *text = std::getenv(name);
  return text ? text : "";
}

} // namespace

uint64_t Config::agreedHash() const {
  return llvm::hash_combine(slotBytes[0], slotBytes[1], slotBytes[2], builtin, emulatedDevice,
                            compileOnFirstUse, copyEngineBytes);
}

llvm::Expected<Config> resolveConfig(const collConfig_t *cfg) {
  Config c;
  std::string error;
  if (auto v = envUnsigned("COLL_WATCHDOG_MS", error); v && *v > 0 && *v < (1u << 31))
    c.watchdogMs = static_cast<uint32_t>(*v);
  if (auto v = envUnsigned("COLL_HOST_THREADS", error))
    c.hostThreads = static_cast<unsigned>(std::min<uint64_t>(*v, 256));
  const char *slotVars[3] = {"COLL_SIMPLE_SLOT_BYTES", "COLL_LL_SLOT_BYTES",
                             "COLL_LL128_SLOT_BYTES"};
  for (int p = 0; p < 3; ++p)
    if (auto v = envBytes(slotVars[p], error)) {
      if (*v < 8 || *v % 8 != 0 || *v > (64u << 20))
        return collError(collInvalidArgument,
                         llvm::formatv("{0}={1}: a slot size must be a multiple of 8 in "
                                       "[8, 64M]",
                                       slotVars[p], std::getenv(slotVars[p])));
      c.slotBytes[p] = *v;
    }
  if (auto v = envBytes("COLL_COPY_ENGINE", error))
    c.copyEngineBytes = *v;
  if (!error.empty())
    return collError(collInvalidArgument, error);
  c.algoDir = envString("COLL_ALGO_DIR");
  c.algoFiles = envString("COLL_ALGO_FILES");
  c.cacheDir = ProgramCache::fromEnvironment();
  c.tuningFile = envString("COLL_TUNING_FILE");
  c.traceFile = envString("COLL_TRACE");
  c.topoFile = envString("COLL_TOPO_FILE");
  c.topoGpus = envString("COLL_TOPO_GPUS");
  if (auto v = envUnsigned("COLL_EMULATED_DEVICE", error)) {
    if (*v > 1)
      return collError(collInvalidArgument,
                       llvm::formatv("COLL_EMULATED_DEVICE={0}: 0 (host) or 1 (the CUDA kernel "
                                     "on the CPU emulation)",
                                     *v));
    c.emulatedDevice = *v == 1;
  }
  if (auto v = envUnsigned("COLL_COMPILE_ON_FIRST_USE", error)) {
    if (*v > 1)
      return collError(collInvalidArgument,
                       llvm::formatv("COLL_COMPILE_ON_FIRST_USE={0}: 1 (the built-in programs "
                                     "are compiled at a call's first use of each) or 0 (at "
                                     "creation); unset, on first use above {1} ranks",
                                     *v, FirstUseCompileRanks));
    c.compileOnFirstUse = static_cast<int>(*v);
  }
  if (!error.empty())
    return collError(collInvalidArgument, error);
  if (!cfg)
    return c;
  if (cfg->magic != 0xc011c0f1u || cfg->size < offsetof(collConfig_t, hostThreads) + sizeof(int))
    return collError(collInvalidArgument,
                     "the collConfig_t was not initialised with COLL_CONFIG_INITIALIZER");
  if (cfg->watchdogMs != COLL_CONFIG_UNDEF_INT) {
    if (cfg->watchdogMs <= 0)
      return collError(collInvalidArgument,
                       llvm::formatv("config watchdogMs {0} must be positive", cfg->watchdogMs));
    c.watchdogMs = static_cast<uint32_t>(cfg->watchdogMs);
  }
  if (cfg->algoDir)
    c.algoDir = cfg->algoDir;
  if (cfg->algoFiles)
    c.algoFiles = cfg->algoFiles;
  if (cfg->tuningFile)
    c.tuningFile = cfg->tuningFile;
  if (cfg->debugLevel != COLL_CONFIG_UNDEF_INT) {
    if (cfg->debugLevel < 0 || cfg->debugLevel > 4)
      return collError(collInvalidArgument,
                       llvm::formatv("config debugLevel {0} is not 0..4", cfg->debugLevel));
    setLevel(static_cast<Level>(cfg->debugLevel));
  }
  if (cfg->embeddedAlgorithms != COLL_CONFIG_UNDEF_INT)
    c.builtin = cfg->embeddedAlgorithms != 0;
  if (cfg->size >= offsetof(collConfig_t, libraries) + sizeof(const char *) && cfg->libraries) {
    llvm::SmallVector<llvm::StringRef, 4> names;
    llvm::StringRef(cfg->libraries).split(names, ',', -1, false);
    for (llvm::StringRef n : names)
      if (!n.trim().empty())
        c.underneath.push_back(n.trim().lower());
  }
  if (cfg->hostThreads != COLL_CONFIG_UNDEF_INT) {
    if (cfg->hostThreads < 0)
      return collError(collInvalidArgument, "config hostThreads must not be negative");
    c.hostThreads = static_cast<unsigned>(std::min(cfg->hostThreads, 256));
  }
  if (cfg->size >= offsetof(collConfig_t, emulatedDevice) + sizeof(int) &&
      cfg->emulatedDevice != COLL_CONFIG_UNDEF_INT) {
    if (cfg->emulatedDevice != 0 && cfg->emulatedDevice != 1)
      return collError(collInvalidArgument,
                       llvm::formatv("config emulatedDevice {0} is not 0 or 1",
                                     cfg->emulatedDevice));
    c.emulatedDevice = cfg->emulatedDevice == 1;
  }
#if !COLL_RUNTIME_HAVE_EMU
  if (c.emulatedDevice)
    return collError(collInvalidUsage, "the emulated device was asked for, but this libcoll was "
                                       "built without it (COLL_ENABLE_CUDA_EMU=OFF)");
#endif
  return c;
}

} // namespace coll::rt
