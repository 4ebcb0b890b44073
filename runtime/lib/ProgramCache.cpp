//===- ProgramCache.cpp - Verified programs kept between jobs -------------===//

#include "ProgramCache.h"


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
constexpr llvm::StringLiteral Magic = "coll-program-cache 3";

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
// each rank reads only the common part and its own steps.
//
//   coll-program-cache 3 ok COMMON_BYTES COMMON_XXH64\n
//   common part: the plan's scalars and the job's tables (Writer's format),
//                then a checksum per rank of its steps and slices
//   every rank's steps (PlanStep records, rank-major), then every rank's
//   slices (PlanSlice records): rank r's are the ranges its tbs name
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

/// The job's tables of a plan, written (Writer, const plan) or read
/// (Reader) in one order.
template <typename IO, typename P> void jobTables(IO &io, P &plan) {
  io.records(plan.scratchChunks);
  io.records(plan.rankTbBegin);
  io.records(plan.tbs);
  io.records(plan.connections);
  io.records(plan.conflicts);
  io.records(plan.sliceClasses);
}

/// Rank r's steps and slices: [first step, end), [first slice, end) in the
/// whole plan's arrays, from its tbs (buildPlan numbers them rank-major).
struct RankRange {
  int64_t stepBegin = 0, stepEnd = 0, sliceBegin = 0, sliceEnd = 0;
};
RankRange rangeOf(const interp::Plan &plan, int32_t rank) {
  RankRange range;
  const int32_t first = plan.rankTbBegin[rank], last = plan.rankTbBegin[rank + 1];
  if (first == last)
    return range;
  const interp::PlanTb &a = plan.tbs[first], &z = plan.tbs[last - 1];
  range.stepBegin = a.stepBegin;
  range.stepEnd = int64_t(z.stepBegin) + z.nSteps;
  range.sliceBegin = a.sliceBegin;
  range.sliceEnd = int64_t(z.sliceBegin) + z.nSlices;
  return range;
}

uint64_t rangeChecksum(const interp::PlanStep *steps, size_t nsteps,
                       const interp::PlanSlice *slices, size_t nslices) {
  uint64_t a = llvm::xxHash64(llvm::StringRef(reinterpret_cast<const char *>(steps),
                                              nsteps * sizeof(interp::PlanStep)));
  uint64_t b = llvm::xxHash64(llvm::StringRef(reinterpret_cast<const char *>(slices),
                                              nslices * sizeof(interp::PlanSlice)));
  return a * 0x9E3779B97F4A7C15ull + b; // order matters: steps, then slices
}

/// The common part of a plan's entry.
std::string writeCommon(const ProgramCache::Entry &entry) {
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
  w.u64(plan.steps.size());
  w.u64(plan.slices.size());
  for (int32_t r = 0; r < plan.nranks; ++r) {
    RankRange range = rangeOf(plan, r);
    w.u64(rangeChecksum(plan.steps.data() + range.stepBegin, range.stepEnd - range.stepBegin,
                        plan.slices.data() + range.sliceBegin, range.sliceEnd - range.sliceBegin));
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

/// The plan of `rank` (-1: the whole plan) from an entry's common part and
/// the file it is in; nothing when a part is damaged.
std::optional<ProgramCache::Entry> readPlan(llvm::StringRef common, int fd, uint64_t recordsAt,
                                            int32_t rank) {
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
  const uint64_t nsteps = r.u64(), nslices = r.u64();
  if (!r.ok() || plan.nranks < 1 || rank < -1 || rank >= plan.nranks ||
      plan.rankTbBegin.size() != size_t(plan.nranks) + 1 || plan.rankTbBegin.front() != 0 ||
      plan.rankTbBegin.back() != int64_t(plan.tbs.size()) ||
      nsteps > (uint64_t(1) << 40) / sizeof(interp::PlanStep) ||
      nslices > (uint64_t(1) << 40) / sizeof(interp::PlanSlice))
    return std::nullopt;
  // A checksum per rank (bounded: rankTbBegin was read whole).
  std::vector<uint64_t> checksums(size_t(plan.nranks));
  for (uint64_t &c : checksums)
    c = r.u64();
  if (!r.ok() || !r.atEnd())
    return std::nullopt;
  for (int32_t g = 0; g < plan.nranks; ++g)
    if (plan.rankTbBegin[g] > plan.rankTbBegin[g + 1])
      return std::nullopt;
  for (const interp::PlanTb &tb : plan.tbs)
    if (tb.stepBegin < 0 || tb.nSteps < 0 || uint64_t(tb.stepBegin) + uint64_t(tb.nSteps) > nsteps ||
        tb.sliceBegin < 0 || tb.nSlices < 0 ||
        uint64_t(tb.sliceBegin) + uint64_t(tb.nSlices) > nslices)
      return std::nullopt;
  const uint64_t slicesAt = recordsAt + nsteps * sizeof(interp::PlanStep);
  auto load = [&](int32_t g, int64_t stepTo, int64_t sliceTo) {
    RankRange range = rangeOf(plan, g);
    if (range.stepBegin > range.stepEnd || range.sliceBegin > range.sliceEnd)
      return false;
    const size_t ns = size_t(range.stepEnd - range.stepBegin);
    const size_t nl = size_t(range.sliceEnd - range.sliceBegin);
    interp::PlanStep *steps = plan.steps.data() + stepTo;
    interp::PlanSlice *slices = plan.slices.data() + sliceTo;
    return readAt(fd, steps, ns * sizeof(interp::PlanStep),
                  recordsAt + uint64_t(range.stepBegin) * sizeof(interp::PlanStep)) &&
           readAt(fd, slices, nl * sizeof(interp::PlanSlice),
                  slicesAt + uint64_t(range.sliceBegin) * sizeof(interp::PlanSlice)) &&
           rangeChecksum(steps, ns, slices, nl) == checksums[size_t(g)];
  };
  if (rank < 0) {
    plan.steps.resize(nsteps);
    plan.slices.resize(nslices);
    for (int32_t g = 0; g < plan.nranks; ++g) {
      RankRange range = rangeOf(plan, g);
      if (!load(g, range.stepBegin, range.sliceBegin))
        return std::nullopt;
    }
  } else {
    RankRange range = rangeOf(plan, rank);
    if (range.stepBegin > range.stepEnd || range.sliceBegin > range.sliceEnd)
      return std::nullopt;
    plan.steps.resize(size_t(range.stepEnd - range.stepBegin));
    plan.slices.resize(size_t(range.sliceEnd - range.sliceBegin));
    if (!load(rank, 0, 0))
      return std::nullopt;
    // Renumbered as slicePlan does.
    for (interp::PlanStep &step : plan.steps)
      step.sliceBegin -= int32_t(range.sliceBegin);
    for (int32_t t = 0; t < int32_t(plan.tbs.size()); ++t) {
      interp::PlanTb &tb = plan.tbs[t];
      if (t >= plan.rankTbBegin[rank] && t < plan.rankTbBegin[rank + 1]) {
        tb.stepBegin -= int32_t(range.stepBegin);
        tb.sliceBegin -= int32_t(range.sliceBegin);
      } else {
        tb.stepBegin = tb.nSteps = tb.sliceBegin = tb.nSlices = 0;
      }
    }
    plan.planRank = rank;
  }
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

std::optional<ProgramCache::Entry> ProgramCache::load(llvm::StringRef key,
                                                     int32_t rank) const {
  if (!enabled())
    return std::nullopt;
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, key);
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0)
    return std::nullopt;
  // Entries are trusted as this build's own compilations: only files this
  // user wrote (ProgramCache.h).
  struct stat st;
  if (::fstat(file.fd, &st) || st.st_uid != geteuid() || !S_ISREG(st.st_mode))
    return std::nullopt;
  const uint64_t size = uint64_t(st.st_size);
  // "coll-program-cache 3 ok COMMON_BYTES CHECKSUM\n", or "... error
  // DIGEST\n" and the error's text.
  char first[256];
  const size_t head = size_t(std::min<uint64_t>(size, sizeof first));
  if (!readAt(file.fd, first, head, 0))
    return std::nullopt;
  llvm::StringRef line(first, head);
  const size_t eol = line.find('\n');
  if (eol == llvm::StringRef::npos)
    return std::nullopt;
  line = line.take_front(eol);
  llvm::SmallVector<llvm::StringRef, 5> fields;
  line.split(fields, ' ');
  if (fields.size() < 4 || (fields[0] + " " + fields[1]).str() != Magic)
    return std::nullopt;
  const uint64_t bodyAt = eol + 1;
  Entry entry;
  if (fields[2] == "error" && fields.size() == 4) {
    std::string body(size_t(size - bodyAt), '\0');
    if (!readAt(file.fd, body.data(), body.size(), bodyAt) || fields[3] != hexDigest(body))
      return std::nullopt;
    entry.error = std::move(body);
    return entry;
  }
  uint64_t commonBytes = 0, checksum = 0;
  if (fields[2] != "ok" || fields.size() != 5 || fields[3].getAsInteger(10, commonBytes) ||
      fields[4].getAsInteger(16, checksum) || commonBytes > size - bodyAt)
    return std::nullopt;
  std::string common(size_t(commonBytes), '\0');
  if (!readAt(file.fd, common.data(), common.size(), bodyAt) ||
      llvm::xxHash64(common) != checksum)
    return std::nullopt;
  return readPlan(common, file.fd, bodyAt + commonBytes, rank);
}

bool ProgramCache::store(llvm::StringRef key, const Entry &entry) const {
  // Only a whole plan makes an entry every rank can read.
  if (!enabled() || (entry.plan && entry.plan->planRank >= 0) ||
      llvm::sys::fs::create_directories(dir))
    return false;
  llvm::SmallString<256> temp, path(dir);
  llvm::sys::path::append(path, key);
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(path + "-%%%%%%.tmp", fd, temp))
    return false;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    if (entry.plan) {
      const std::string common = writeCommon(entry);
      os << Magic << " ok " << common.size() << ' ' << llvm::utohexstr(llvm::xxHash64(common))
         << '\n'
         << common;
      os.write(reinterpret_cast<const char *>(entry.plan->steps.data()),
               entry.plan->steps.size() * sizeof(interp::PlanStep));
      os.write(reinterpret_cast<const char *>(entry.plan->slices.data()),
               entry.plan->slices.size() * sizeof(interp::PlanSlice));
    } else {
      os << Magic << " error " << hexDigest(entry.error) << '\n' << entry.error;
    }
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
