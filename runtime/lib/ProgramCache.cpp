//===- ProgramCache.cpp - Verified programs kept between jobs -------------===//

#include "ProgramCache.h"


#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

namespace coll::rt {

namespace {

/// The first line's first two words; the number changes with the format.
constexpr llvm::StringLiteral Magic = "coll-program-cache 9";

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
// The plan in binary: a cache entry is read on every rank of every job, and
// each rank reads only the common part and its own part.
//
//   coll-program-cache 5 ok COMMON_BYTES COMMON_XXH64\n
//   common part: the plan's scalars and the tables of the job that every
//                rank's plan holds (per rank: scratch chunks, connections
//                into it; the size conflicts; the chunk classes), then per
//                rank where its part is, its size and its checksum
//   every rank's part, one after another: its plan (interp::slicePlan)'s
//                tbs, connections, steps and slices
//
// The records are written as this build lays them out; only this build
// reads them (the key holds its build id).
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
  template <typename T> void records(const std::vector<T> &v) {
    static_assert(std::is_trivially_copyable_v<T>);
    u64(v.size());
    if (!v.empty()) // an empty vector's data() may be null
      out.append(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
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
  template <typename T> void records(std::vector<T> &v) {
    v.resize(count(sizeof(T)));
    if (!v.empty()) // an empty vector's data() may be null
      std::memcpy(v.data(), in.data(), v.size() * sizeof(T));
    in = in.drop_front(v.size() * sizeof(T));
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

void writeDefinition(const ir::Definition &def, Writer &w) {
  for (int64_t v : {int64_t(def.nranks), int64_t(def.inputChunks), int64_t(def.outputChunks),
                    int64_t(def.rule), int64_t(def.ruleChunks), int64_t(def.ruleRoot)})
    w.i32(v);
  w.u64(def.inputDefined.size());
  for (const std::vector<bool> &defined : def.inputDefined) {
    w.u64(defined.size());
    for (bool b : defined)
      w.i32(b);
  }
  w.u64(def.expected.size());
  for (const auto &rank : def.expected) {
    w.u64(rank.size());
    for (const std::vector<uint32_t> &ids : rank) {
      w.u64(ids.size());
      for (uint32_t id : ids)
        w.i32(int32_t(id));
    }
  }
}

ir::Definition readDefinition(Reader &r) {
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
  return def;
}

/// The job's tables every rank's plan holds, written (Writer, const plan)
/// or read (Reader) in one order.
template <typename IO, typename P> void jobTables(IO &io, P &plan) {
  io.records(plan.scratchChunks);
  io.records(plan.connectionsInto);
  io.records(plan.conflicts);
  io.records(plan.sliceClasses);
  io.records(plan.signals);
  io.records(plan.memberPeers);
  io.records(plan.memberSignals);
}

/// What only one rank's plan holds (interp::slicePlan), in one order.
template <typename IO, typename P> void rankRecords(IO &io, P &plan) {
  io.records(plan.tbs);
  io.records(plan.connections);
  io.records(plan.steps);
  io.records(plan.stepPeers);
  io.records(plan.deps);
  io.records(plan.slices);
  io.records(plan.copyBegin);
  io.records(plan.copyEnd);
}

/// Where rank r's part is, after the common part.
struct RankPart {
  uint64_t offset = 0, bytes = 0, checksum = 0;
};

/// The common part of a plan's entry, given where each rank's part is.
std::string writeCommon(const ProgramCache::Entry &entry, const std::vector<RankPart> &parts) {
  const interp::Plan &plan = *entry.plan;
  std::string out;
  Writer w(out);
  w.str(plan.fileName);
  w.str(plan.name);
  for (int64_t v : {int64_t(plan.collective), int64_t(plan.protocol), int64_t(plan.nranks),
                    int64_t(plan.root), int64_t(plan.inplace), int64_t(plan.outofplace),
                    int64_t(plan.shape.nranks), int64_t(plan.shape.chunksPerBlock),
                    int64_t(plan.shape.inputPerRank), int64_t(plan.shape.outputPerRank),
                    int64_t(plan.maxIrSteps), int64_t(entry.maxChannel)})
    w.i32(v);
  w.u64(plan.minBytes);
  w.u64(plan.maxBytes);
  w.u64(entry.hash);
  w.i32(plan.condition != nullptr);
  if (plan.condition)
    writeDefinition(*plan.condition, w);
  jobTables(w, plan);
  for (const RankPart &part : parts) {
    w.u64(part.offset);
    w.u64(part.bytes);
    w.u64(part.checksum);
  }
  return out;
}

/// Reads exactly `n` bytes at `offset` of `fd`.
bool readAt(int fd, void *to, size_t n, uint64_t offset) {
  auto *p = static_cast<char *>(to);
  while (n) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    p += got;
    n -= size_t(got);
    offset += uint64_t(got);
  }
  return true;
}

/// The plan of `rank` from an entry's common part and the file it is in
/// (its rank's part at `partsAt` + its offset); nothing when a part is
/// damaged.
std::optional<ProgramCache::Entry> readPlan(llvm::StringRef common, int fd, uint64_t partsAt,
                                            uint64_t fileBytes, int32_t rank) {
  Reader r(common);
  ProgramCache::Entry entry;
  interp::Plan plan;
  plan.fileName = r.str();
  plan.name = r.str();
  plan.collective = r.oneOf<ir::Collective>(NumCollectives);
  plan.protocol = r.oneOf<ir::Protocol>(3);
  plan.nranks = r.i32();
  plan.root = r.i32();
  plan.inplace = r.oneOf<bool>(2);
  plan.outofplace = r.oneOf<bool>(2);
  plan.shape.nranks = r.i32();
  plan.shape.chunksPerBlock = r.i32();
  plan.shape.inputPerRank = r.oneOf<bool>(2);
  plan.shape.outputPerRank = r.oneOf<bool>(2);
  plan.maxIrSteps = r.i32();
  entry.maxChannel = r.i32();
  plan.minBytes = r.u64();
  plan.maxBytes = r.u64();
  entry.hash = r.u64();
  if (r.oneOf<bool>(2))
    plan.condition = std::make_shared<const ir::Definition>(readDefinition(r));
  jobTables(r, plan);
  // The parts' table (bounded: scratchChunks, one per rank, was read whole).
  if (!r.ok() || plan.nranks < 1 || rank < 0 || rank >= plan.nranks ||
      plan.scratchChunks.size() != size_t(plan.nranks))
    return std::nullopt;
  RankPart part;
  for (int32_t g = 0; g < plan.nranks; ++g) {
    RankPart p{r.u64(), r.u64(), r.u64()};
    if (g == rank)
      part = p;
  }
  if (!r.ok() || !r.atEnd() || part.offset > fileBytes - partsAt ||
      part.bytes > fileBytes - partsAt - part.offset)
    return std::nullopt;
  std::string records(size_t(part.bytes), '\0');
  if (!readAt(fd, records.data(), records.size(), partsAt + part.offset) ||
      llvm::xxHash64(records) != part.checksum)
    return std::nullopt;
  Reader rr(records);
  rankRecords(rr, plan);
  if (!rr.ok() || !rr.atEnd())
    return std::nullopt;
  // This rank's tbs from 0, as slicePlan numbers them.
  plan.rankTbBegin.assign(size_t(plan.nranks) + 1, 0);
  for (size_t g = size_t(rank) + 1; g < plan.rankTbBegin.size(); ++g)
    plan.rankTbBegin[g] = int32_t(plan.tbs.size());
  plan.planRank = rank;
  if (llvm::Error err = interp::checkPlanIndices(plan)) {
    llvm::consumeError(std::move(err));
    return std::nullopt;
  }
  entry.plan = std::move(plan);
  return entry;
}

/// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

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

namespace {

/// An entry's file, open for reading, and the fields of its first line:
/// "coll-program-cache N ok COMMON_BYTES CHECKSUM", or "... error DIGEST"
/// or "... note DIGEST" and then the text.
struct OpenEntry {
  Fd file;
  uint64_t size = 0, bodyAt = 0;
  llvm::SmallVector<std::string, 5> fields;

  bool open(llvm::StringRef dir, llvm::StringRef key) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, key);
    file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file.fd < 0)
      return false;
    // Entries are trusted as this build's own compilations: only files this
    // user wrote (ProgramCache.h).
    struct stat st;
    if (::fstat(file.fd, &st) || st.st_uid != geteuid() || !S_ISREG(st.st_mode))
      return false;
    size = uint64_t(st.st_size);
    char first[256];
    const size_t head = size_t(std::min<uint64_t>(size, sizeof first));
    if (!readAt(file.fd, first, head, 0))
      return false;
    llvm::StringRef line(first, head);
    const size_t eol = line.find('\n');
    if (eol == llvm::StringRef::npos)
      return false;
    llvm::SmallVector<llvm::StringRef, 5> parts;
    line.take_front(eol).split(parts, ' ');
    if (parts.size() < 4 || (parts[0] + " " + parts[1]).str() != Magic)
      return false;
    for (llvm::StringRef part : parts)
      fields.push_back(part.str());
    bodyAt = eol + 1;
    return true;
  }

  /// The text after the first line, when the entry is of `kind` ("error",
  /// "note") and its digest matches.
  std::optional<std::string> text(llvm::StringRef kind) const {
    if (fields[2] != kind || fields.size() != 4)
      return std::nullopt;
    std::string body(size_t(size - bodyAt), '\0');
    if (!readAt(file.fd, body.data(), body.size(), bodyAt) || fields[3] != hexDigest(body))
      return std::nullopt;
    return body;
  }
};

/// Writes `contents` to `key` in `dir` under a temporary name, then renames
/// it, so that a reader never sees part of it.
bool writeEntry(llvm::StringRef dir, llvm::StringRef key,
                llvm::function_ref<void(llvm::raw_ostream &)> contents) {
  if (llvm::sys::fs::create_directories(dir))
    return false;
  llvm::SmallString<256> temp, path(dir);
  llvm::sys::path::append(path, key);
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(path + "-%%%%%%.tmp", fd, temp))
    return false;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    contents(os);
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

} // namespace

std::optional<ProgramCache::Entry> ProgramCache::load(llvm::StringRef key,
                                                     int32_t rank) const {
  if (!enabled())
    return std::nullopt;
  OpenEntry open;
  if (!open.open(dir, key))
    return std::nullopt;
  const auto &fields = open.fields;
  const Fd &file = open.file;
  const uint64_t size = open.size, bodyAt = open.bodyAt;
  if (fields[2] == "error") {
    std::optional<std::string> text = open.text("error");
    if (!text)
      return std::nullopt;
    Entry entry;
    entry.error = std::move(*text);
    return entry;
  }
  uint64_t commonBytes = 0, checksum = 0;
  if (fields[2] != "ok" || fields.size() != 5 ||
      llvm::StringRef(fields[3]).getAsInteger(10, commonBytes) ||
      llvm::StringRef(fields[4]).getAsInteger(16, checksum) || commonBytes > size - bodyAt)
    return std::nullopt;
  std::string common(size_t(commonBytes), '\0');
  if (!readAt(file.fd, common.data(), common.size(), bodyAt) ||
      llvm::xxHash64(common) != checksum)
    return std::nullopt;
  return readPlan(common, file.fd, bodyAt + commonBytes, size, rank);
}

bool ProgramCache::store(llvm::StringRef key, const Entry &entry) const {
  // Only a whole plan makes an entry every rank can read.
  if (!enabled() || (entry.plan && entry.plan->planRank >= 0))
    return false;
  return writeEntry(dir, key, [&](llvm::raw_ostream &os) {
    if (entry.plan) {
      // Every rank's part as slicePlan makes it, one after another.
      const interp::Plan &whole = *entry.plan;
      const std::vector<std::vector<int32_t>> byRank = interp::connectionsByRank(whole);
      std::string parts;
      std::vector<RankPart> table(size_t(whole.nranks));
      for (int32_t g = 0; g < whole.nranks; ++g) {
        const interp::Plan mine = interp::slicePlan(whole, g, &byRank[size_t(g)]);
        const size_t at = parts.size();
        Writer w(parts);
        rankRecords(w, mine);
        table[size_t(g)] = {at, parts.size() - at,
                            llvm::xxHash64(llvm::StringRef(parts).substr(at))};
      }
      const std::string common = writeCommon(entry, table);
      os << Magic << " ok " << common.size() << ' ' << llvm::utohexstr(llvm::xxHash64(common))
         << '\n'
         << common << parts;
    } else {
      os << Magic << " error " << hexDigest(entry.error) << '\n' << entry.error;
    }
  });
}

std::optional<std::string> ProgramCache::loadNote(llvm::StringRef key) const {
  OpenEntry open;
  if (!enabled() || !open.open(dir, key))
    return std::nullopt;
  return open.text("note");
}

bool ProgramCache::storeNote(llvm::StringRef key, llvm::StringRef text) const {
  return enabled() && writeEntry(dir, key, [&](llvm::raw_ostream &os) {
           os << Magic << " note " << hexDigest(text) << '\n' << text;
         });
}

} // namespace coll::rt
