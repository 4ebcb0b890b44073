//===- ProgramCache.cpp - Verified programs kept between jobs -------------===//

#include "ProgramCache.h"


#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

namespace coll::rt {

namespace {

/// The first line's first two words; the number changes with the format.
constexpr llvm::StringLiteral Magic = "coll-program-cache 2";

std::string hexDigest(llvm::StringRef data) {
  llvm::SHA256 sha;
  sha.update(data);
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

/// The build id in the PT_NOTE segments of the object that holds `address`.
struct BuildIdSearch {
  uintptr_t address;
  std::string id;
};

int findBuildId(struct dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<BuildIdSearch *>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && search->address >= begin &&
            search->address < begin + ph.p_memsz;
  }
  if (!holds)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE)
      continue;
    const char *at = reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
    const char *end = at + ph.p_memsz;
    auto align4 = [](size_t n) { return (n + 3) & ~size_t(3); };
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, at, sizeof note);
      const char *name = at + sizeof note;
      const char *desc = name + align4(note.n_namesz);
      if (desc + note.n_descsz > end)
        break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        search->id = llvm::toHex(llvm::StringRef(desc, note.n_descsz), /*LowerCase=*/true);
        return 1;
      }
      at = desc + align4(note.n_descsz);
    }
  }
  return 1; // the object holds the address but has no build id
}

//===----------------------------------------------------------------------===//
// The algorithm in binary: a cache entry is read on every rank of every job,
// and parsing XML costs more than planning the result.
//===----------------------------------------------------------------------===//

constexpr unsigned NumCollectives = 0
#define COLL_COLLECTIVE(Enum, XmlName, Root, InPerRank, OutPerRank, Red, MulN, Off) +1
#include "coll/ir/Collectives.def"
    ;

class Writer {
public:
  explicit Writer(std::string &out) : out(out) {}
  void u64(uint64_t v) { out.append(reinterpret_cast<const char *>(&v), sizeof v); }
  void i32(int64_t v) {
    int32_t x = int32_t(v);
    out.append(reinterpret_cast<const char *>(&x), sizeof x);
  }
  void str(llvm::StringRef s) {
    u64(s.size());
    out.append(s.data(), s.size());
  }

private:
  std::string &out;
};

/// Reads what Writer wrote; every read checks the bounds, and a read past
/// the end, a count larger than what is left or a value outside its set
/// leaves the reader failed.
class Reader {
public:
  explicit Reader(llvm::StringRef in) : in(in) {}
  bool ok() const { return good; }
  bool atEnd() const { return in.empty(); }
  uint64_t u64() { return take<uint64_t>(); }
  int32_t i32() { return take<int32_t>(); }
  /// A count of items of at least `itemBytes` bytes each.
  size_t count(size_t itemBytes) {
    uint64_t n = u64();
    if (n > in.size() / std::max<size_t>(itemBytes, 1))
      good = false;
    return good ? size_t(n) : 0;
  }
  std::string str() {
    size_t n = count(1);
    std::string s = in.take_front(n).str();
    in = in.drop_front(n);
    return s;
  }
  /// An enum value in [0, size).
  template <typename E> E oneOf(unsigned size) {
    int32_t v = i32();
    if (v < 0 || unsigned(v) >= size)
      good = false;
    return good ? E(v) : E(0);
  }

private:
  template <typename T> T take() {
    T v{};
    if (in.size() < sizeof v) {
      good = false;
      in = {};
      return v;
    }
    std::memcpy(&v, in.data(), sizeof v);
    in = in.drop_front(sizeof v);
    return v;
  }
  llvm::StringRef in;
  bool good = true;
};

void writeBinary(const ir::Algorithm &alg, std::string &out) {
  Writer w(out);
  w.str(alg.name);
  w.str(alg.collectiveSpelling);
  for (int64_t v : {int64_t(alg.protocol), int64_t(alg.nchannels), int64_t(alg.nchunksPerLoop),
                    int64_t(alg.collective), int64_t(alg.root), int64_t(alg.inplace),
                    int64_t(alg.outofplace)})
    w.i32(v);
  w.u64(alg.minBytes);
  w.u64(alg.maxBytes);
  w.u64(alg.gpus.size());
  for (const ir::Gpu &gpu : alg.gpus) {
    w.i32(gpu.inputChunks);
    w.i32(gpu.outputChunks);
    w.i32(gpu.scratchChunks);
    w.u64(gpu.tbs.size());
    for (const ir::ThreadBlock &tb : gpu.tbs) {
      w.i32(tb.sendPeer);
      w.i32(tb.recvPeer);
      w.i32(tb.channel);
      w.u64(tb.steps.size());
      for (const ir::Step &st : tb.steps)
        for (int64_t v : {int64_t(st.type), int64_t(st.srcBuf), int64_t(st.srcOff),
                          int64_t(st.dstBuf), int64_t(st.dstOff), int64_t(st.count),
                          int64_t(st.depTb), int64_t(st.depStep), int64_t(st.hasDep)})
          w.i32(v);
    }
  }
  w.i32(alg.condition.has_value());
  if (const std::optional<ir::Definition> &def = alg.condition) {
    for (int64_t v : {int64_t(def->nranks), int64_t(def->inputChunks),
                      int64_t(def->outputChunks), int64_t(def->rule), int64_t(def->ruleChunks),
                      int64_t(def->ruleRoot)})
      w.i32(v);
    w.u64(def->inputDefined.size());
    for (const std::vector<bool> &defined : def->inputDefined) {
      w.u64(defined.size());
      for (bool b : defined)
        w.i32(b);
    }
    w.u64(def->expected.size());
    for (const auto &rank : def->expected) {
      w.u64(rank.size());
      for (const std::vector<uint32_t> &ids : rank) {
        w.u64(ids.size());
        for (uint32_t id : ids)
          w.i32(int32_t(id));
      }
    }
  }
}

std::optional<ir::Algorithm> readBinary(llvm::StringRef in) {
  Reader r(in);
  ir::Algorithm alg;
  alg.name = r.str();
  alg.collectiveSpelling = r.str();
  alg.protocol = r.oneOf<ir::Protocol>(3);
  alg.nchannels = r.i32();
  alg.nchunksPerLoop = r.i32();
  alg.collective = r.oneOf<ir::Collective>(NumCollectives);
  alg.root = r.i32();
  alg.inplace = r.oneOf<bool>(2);
  alg.outofplace = r.oneOf<bool>(2);
  alg.minBytes = r.u64();
  alg.maxBytes = r.u64();
  alg.gpus.resize(r.count(4 * sizeof(int32_t)));
  for (ir::Gpu &gpu : alg.gpus) {
    gpu.inputChunks = r.i32();
    gpu.outputChunks = r.i32();
    gpu.scratchChunks = r.i32();
    gpu.tbs.resize(r.count(4 * sizeof(int32_t)));
    for (ir::ThreadBlock &tb : gpu.tbs) {
      tb.sendPeer = r.i32();
      tb.recvPeer = r.i32();
      tb.channel = r.i32();
      tb.steps.resize(r.count(9 * sizeof(int32_t)));
      for (ir::Step &st : tb.steps) {
        st.type = r.oneOf<ir::StepType>(ir::NumStepTypes);
        st.srcBuf = r.oneOf<ir::BufferKind>(3);
        st.srcOff = r.i32();
        st.dstBuf = r.oneOf<ir::BufferKind>(3);
        st.dstOff = r.i32();
        st.count = r.i32();
        st.depTb = r.i32();
        st.depStep = r.i32();
        st.hasDep = r.oneOf<bool>(2);
      }
    }
  }
  if (r.oneOf<bool>(2)) {
    ir::Definition def;
    def.nranks = r.i32();
    def.inputChunks = r.i32();
    def.outputChunks = r.i32();
    def.rule = r.oneOf<ir::Collective>(NumCollectives);
    def.ruleChunks = r.i32();
    def.ruleRoot = r.i32();
    def.inputDefined.resize(r.count(sizeof(uint64_t)));
    for (std::vector<bool> &defined : def.inputDefined) {
      defined.resize(r.count(sizeof(int32_t)));
      for (size_t i = 0; i < defined.size(); ++i)
        defined[i] = r.oneOf<bool>(2);
    }
    def.expected.resize(r.count(sizeof(uint64_t)));
    for (auto &rank : def.expected) {
      rank.resize(r.count(sizeof(uint64_t)));
      for (std::vector<uint32_t> &ids : rank) {
        ids.resize(r.count(sizeof(int32_t)));
        for (uint32_t &id : ids)
          id = uint32_t(r.i32());
      }
    }
    alg.condition = std::move(def);
  }
  if (!r.ok() || !r.atEnd())
    return std::nullopt;
  return alg;
}

} // namespace

std::string selfBuildId() {
  BuildIdSearch search{reinterpret_cast<uintptr_t>(&selfBuildId), {}};
  dl_iterate_phdr(findBuildId, &search);
  return search.id;
}

ProgramCache::ProgramCache(std::string directory) : buildId(selfBuildId()) {
  if (!buildId.empty())
    dir = std::move(directory);
}

std::string ProgramCache::fromEnvironment() {
  if (const char *off = std::getenv("COLL_CACHE_DISABLE"); off && *off && std::strcmp(off, "0"))
    return "";
  if (const char *path = std::getenv("COLL_CACHE_PATH"); path && *path)
    return path;
  llvm::SmallString<256> dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    dir = xdg;
  else if (const char *home = std::getenv("HOME"); home && *home)
    llvm::sys::path::append(dir, home, ".cache");
  else
    return "";
  llvm::sys::path::append(dir, "coll", "programs");
  return std::string(dir);
}

std::string ProgramCache::key(llvm::StringRef source, llvm::StringRef parameters) const {
  llvm::SHA256 sha;
  for (llvm::StringRef part : {llvm::StringRef(Magic), llvm::StringRef(buildId), source, parameters}) {
    sha.update(part);
    sha.update(llvm::StringRef("\0", 1));
  }
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

std::optional<ProgramCache::Entry> ProgramCache::load(llvm::StringRef key) const {
  if (!enabled())
    return std::nullopt;
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, key);
  // Entries are trusted as this build's own compilations: only files this
  // user wrote (ProgramCache.h).
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status) || status.getUser() != geteuid())
    return std::nullopt;
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!file)
    return std::nullopt;
  // "coll-program-cache 1 ok|error DIGEST\n" and the body the digest is of.
  auto [header, body] = (*file)->getBuffer().split('\n');
  llvm::SmallVector<llvm::StringRef, 4> fields;
  header.split(fields, ' ');
  if (fields.size() != 4 || (fields[0] + " " + fields[1]).str() != Magic ||
      (fields[2] != "ok" && fields[2] != "error") || fields[3] != hexDigest(body))
    return std::nullopt;
  Entry entry;
  if (fields[2] == "error") {
    entry.error = body.str();
    return entry;
  }
  entry.alg = readBinary(body);
  if (!entry.alg)
    return std::nullopt;
  return entry;
}

bool ProgramCache::store(llvm::StringRef key, const Entry &entry) const {
  if (!enabled() || llvm::sys::fs::create_directories(dir))
    return false;
  std::string body;
  if (entry.alg)
    writeBinary(*entry.alg, body);
  else
    body = entry.error;
  llvm::SmallString<256> temp, path(dir);
  llvm::sys::path::append(path, key);
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(path + "-%%%%%%.tmp", fd, temp))
    return false;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << Magic << (entry.alg ? " ok " : " error ") << hexDigest(body) << '\n' << body;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(temp);
      return false;
    }
  }
  if (llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return false;
  }
  return true;
}

} // namespace coll::rt
