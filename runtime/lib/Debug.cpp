//===- Debug.cpp - COLL_DEBUG logging ---------------------------------------===//

#include "coll/runtime/Debug.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <sys/syscall.h>
#include <unistd.h>

namespace coll::rt {

namespace {

struct Settings {
  std::atomic<int> level{static_cast<int>(Level::Warn)};
  unsigned subsys = AllSubsys;
  FILE *out = stderr;
  std::string host;
  std::mutex mutex;

  Settings() {
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) != 0)
      std::snprintf(name, sizeof name, "unknown");
    host = name;
    if (const char *env = std::getenv("COLL_DEBUG"))
      level.store(static_cast<int>(parseLevel(env)), std::memory_order_relaxed);
    if (const char *env = std::getenv("COLL_DEBUG_SUBSYS"))
      subsys = parseSubsys(env);
    if (const char *env = std::getenv("COLL_DEBUG_FILE"); env && *env) {
      std::string path;
      for (const char *p = env; *p; ++p) {
        if (p[0] == '%' && p[1] == 'h') {
          path += host;
          ++p;
        } else if (p[0] == '%' && p[1] == 'p') {
          path += std::to_string(getpid());
          ++p;
        } else {
          path += *p;
        }
      }
      if (FILE *f = std::fopen(path.c_str(), "a"))
        out = f;
      else
        std::fprintf(stderr, "%s:%d COLL WARN cannot open COLL_DEBUG_FILE %s; logging to stderr\n",
                     host.c_str(), getpid(), path.c_str());
    }
  }

  static Level parseLevel(llvm::StringRef text) {
    std::string upper = text.trim().upper();
    if (upper == "VERSION")
      return Level::Version;
    if (upper == "WARN")
      return Level::Warn;
    if (upper == "INFO")
      return Level::Info;
    if (upper == "TRACE")
      return Level::Trace;
    if (upper == "NONE" || upper.empty())
      return Level::None;
    std::fprintf(stderr, "COLL WARN COLL_DEBUG=%s is not VERSION, WARN, INFO or TRACE; using WARN\n",
                 text.str().c_str());
    return Level::Warn;
  }

  static unsigned parseSubsys(llvm::StringRef text) {
    bool exclude = text.consume_front("^");
    unsigned mask = 0;
    llvm::SmallVector<llvm::StringRef, 8> parts;
    text.split(parts, ',', -1, false);
    for (llvm::StringRef part : parts) {
      std::string name = part.trim().upper();
      if (name == "INIT")
        mask |= Init;
      else if (name == "COLL")
        mask |= Coll;
      else if (name == "P2P")
        mask |= P2P;
      else if (name == "SHM")
        mask |= Shm;
      else if (name == "NET")
        mask |= Net;
      else if (name == "TUNING")
        mask |= Tuning;
      else if (name == "ENV")
        mask |= Env;
      else if (name == "ALL")
        mask |= AllSubsys;
    }
    return exclude ? ~mask : mask;
  }
};

Settings &settings() {
  static Settings s;
  return s;
}

const char *levelName(Level level) {
  switch (level) {
  case Level::None: return "NONE";
  case Level::Version: return "VERSION";
  case Level::Warn: return "WARN";
  case Level::Info: return "INFO";
  case Level::Trace: return "TRACE";
  }
  return "?";
}

} // namespace

bool logEnabled(Level level, unsigned subsys) {
  Settings &s = settings();
  if (static_cast<int>(level) > s.level.load(std::memory_order_relaxed))
    return false;
  return level <= Level::Warn || (s.subsys & subsys) != 0;
}

void log(Level level, unsigned subsys, int rank, const llvm::Twine &message) {
  if (!logEnabled(level, subsys))
    return;
  Settings &s = settings();
  std::string line;
  if (rank >= 0)
    line = llvm::formatv("{0}:{1}:{2} [{3}] COLL {4} ", s.host, getpid(),
                         static_cast<long>(syscall(SYS_gettid)), rank, levelName(level))
               .str();
  else
    line = llvm::formatv("{0}:{1}:{2} COLL {3} ", s.host, getpid(),
                         static_cast<long>(syscall(SYS_gettid)), levelName(level))
               .str();
  line += message.str();
  if (line.empty() || line.back() != '\n')
    line += '\n';
  std::lock_guard<std::mutex> lock(s.mutex);
  std::fputs(line.c_str(), s.out);
  std::fflush(s.out);
}

Level configuredLevel() {
  return static_cast<Level>(settings().level.load(std::memory_order_relaxed));
}

void setLevel(Level level) {
  settings().level.store(static_cast<int>(level), std::memory_order_relaxed);
}

} // namespace coll::rt
