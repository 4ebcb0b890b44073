//===- Progress.cpp - A sweep's progress line, on a terminal only ---------===//

#include "Progress.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/ioctl.h>
#include <unistd.h>

struct collProgress {
  FILE *out = nullptr;
  std::string tool;
  size_t steps = 0, step = 0;
  double work = 0, done = 0, current = 0;
  std::chrono::steady_clock::time_point start;
  unsigned width = 80;
  bool shown = false;
};

namespace {

/// Whether mpirun's file descriptor `fd` (this process's parent's) is a
/// terminal.
bool parentIsTerminal(int fd) {
  const std::string path = "/proc/" + std::to_string(getppid()) + "/fd/" + std::to_string(fd);
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return false;
  const bool tty = isatty(fileno(f));
  std::fclose(f);
  return tty;
}

/// Where the line goes: standard error when it is a terminal. In a process
/// mpirun started, whose standard error is a pipe to mpirun and standard
/// output a pseudo-terminal whatever mpirun's own are, standard output when
/// both of mpirun's are terminals: mpirun copies the two streams separately,
/// so only on the table's own stream is the line erased before each row
/// rather than some time around it. Otherwise nowhere.
FILE *terminal() {
  if (isatty(STDERR_FILENO))
    return stderr;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") && parentIsTerminal(STDOUT_FILENO) &&
      parentIsTerminal(STDERR_FILENO))
    return stdout;
  return nullptr;
}

/// "about 45 s", "about 3 min 20 s", "about 2 h 5 min", "under 1 s".
std::string duration(double s) {
  const long t = long(s + 0.5);
  char buf[48];
  if (t < 1)
    return "under 1 s";
  if (t < 60)
    std::snprintf(buf, sizeof buf, "about %ld s", t);
  else if (t < 3600)
    std::snprintf(buf, sizeof buf, "about %ld min %ld s", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "about %ld h %ld min", t / 3600, t / 60 % 60);
  return buf;
}

} // namespace

extern "C" collProgress *collProgressStart(const char *tool, size_t steps, double work) {
  FILE *out = terminal();
  if (!out)
    return nullptr;
  auto *p = new collProgress;
  p->out = out;
  p->tool = tool;
  p->steps = steps;
  p->work = work;
  p->start = std::chrono::steady_clock::now();
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
    p->width = ws.ws_col;
  return p;
}

extern "C" void collProgressStep(collProgress *p, const char *what, double work) {
  if (!p)
    return;
  const auto now = std::chrono::steady_clock::now();
  if (p->step)
    p->done += p->current;
  p->current = work;
  ++p->step;
  std::string line = p->tool + ": " + what + " (" + std::to_string(p->step) + "/" +
                     std::to_string(p->steps) + ")";
  const double elapsed = std::chrono::duration<double>(now - p->start).count();
  if (p->done > 0 && p->work > p->done)
    line += ", " + duration(elapsed * (p->work - p->done) / p->done) + " left";
  // One row of the terminal: '\r' returns to the start of the last row only.
  if (line.size() >= p->width)
    line.resize(p->width - 1);
  std::fprintf(p->out, "\r%s\033[K", line.c_str());
  std::fflush(p->out);
  p->shown = true;
}

extern "C" void collProgressClear(collProgress *p) {
  if (!p || !p->shown)
    return;
  std::fputs("\r\033[K", p->out);
  std::fflush(p->out);
  p->shown = false;
}

extern "C" void collProgressEnd(collProgress *p) {
  collProgressClear(p);
  delete p;
}
