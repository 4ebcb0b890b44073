//===- Socket.cpp - TCP for the bootstrap -----------------------------------===//

#include "coll/runtime/Socket.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

namespace coll::rt {

namespace {

llvm::Error sysError(const llvm::Twine &what) {
  int err = errno;
  return llvm::createStringError(std::error_code(err, std::generic_category()), "%s: %s",
                                 what.str().c_str(), std::strerror(err));
}

int msLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));
}

} // namespace

uint16_t SockAddr::port() const {
  if (storage.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in *>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6 *>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(uint16_t port) {
  if (storage.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in *>(&storage)->sin_port = htons(port);
  else if (storage.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6 *>(&storage)->sin6_port = htons(port);
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(&storage)->sin_addr, host,
              sizeof host);
    return llvm::formatv("{0}:{1}", host, port()).str();
  }
  if (storage.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(&storage)->sin6_addr, host,
              sizeof host);
    return llvm::formatv("[{0}]:{1}", host, port()).str();
  }
  return "<no address>";
}

llvm::Expected<SockAddr> parseAddress(llvm::StringRef text) {
  llvm::StringRef host = text, port;
  if (text.startswith("[")) {
    size_t close = text.find(']');
    if (close == llvm::StringRef::npos)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "'%s' is not an address (an unclosed '[')",
                                     text.str().c_str());
    host = text.slice(1, close);
    llvm::StringRef rest = text.substr(close + 1);
    if (rest.consume_front(":"))
      port = rest;
    else if (!rest.empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "'%s' is not an address ('[host]:port')",
                                     text.str().c_str());
  } else if (text.count(':') == 1) {
    std::tie(host, port) = text.split(':');
  }
  unsigned portNumber = 0;
  if (!port.empty() && (port.getAsInteger(10, portNumber) || portNumber > 65535))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%s': the port '%s' is not a number in 0..65535",
                                   text.str().c_str(), port.str().c_str());
  if (host.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%s' names no host (expected host:port)",
                                   text.str().c_str());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  int rc = getaddrinfo(host.str().c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "cannot resolve '%s': %s",
                                   host.str().c_str(), gai_strerror(rc));
  SockAddr addr;
  // Prefer IPv4 when a name has both.
  const addrinfo *pick = found;
  for (const addrinfo *a = found; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  std::memcpy(&addr.storage, pick->ai_addr, pick->ai_addrlen);
  addr.length = pick->ai_addrlen;
  freeaddrinfo(found);
  addr.setPort(static_cast<uint16_t>(portNumber));
  return addr;
}

std::vector<Interface> selectInterfaces(llvm::StringRef spec) {
  spec = spec.trim();
  bool exclude = spec.consume_front("^");
  bool exact = spec.consume_front("=");
  llvm::SmallVector<llvm::StringRef, 4> names;
  spec.split(names, ',', -1, false);
  auto listed = [&](llvm::StringRef name) {
    for (llvm::StringRef n : names) {
      n = n.trim();
      if (exact ? name == n : name.startswith(n))
        return true;
    }
    return false;
  };
  std::vector<Interface> all, picked, loopback;
  ifaddrs *list = nullptr;
  if (getifaddrs(&list) != 0)
    return {};
  for (ifaddrs *i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
      continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6)
      continue;
    if (family == AF_INET6) {
      auto *a6 = reinterpret_cast<sockaddr_in6 *>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr))
        continue; // needs a scope id; IPv4 or global IPv6 is simpler to carry
    }
    Interface iface;
    iface.name = i->ifa_name;
    size_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&iface.address.storage, i->ifa_addr, len);
    iface.address.length = static_cast<socklen_t>(len);
    iface.address.setPort(0);
    all.push_back(iface);
  }
  freeifaddrs(list);
  // IPv4 first, in the kernel's order otherwise.
  std::stable_sort(all.begin(), all.end(), [](const Interface &a, const Interface &b) {
    return a.address.storage.ss_family == AF_INET && b.address.storage.ss_family != AF_INET;
  });
  if (spec.empty()) {
    for (const Interface &iface : all) {
      llvm::StringRef name = iface.name;
      if (name.startswith("lo"))
        loopback.push_back(iface);
      else if (!name.startswith("docker"))
        picked.push_back(iface);
    }
    return picked.empty() ? loopback : picked;
  }
  for (const Interface &iface : all)
    if (listed(iface.name) != exclude)
      picked.push_back(iface);
  return picked;
}

llvm::Expected<SockAddr> bootstrapAddress() {
  const char *spec = std::getenv("COLL_SOCKET_IFNAME");
  std::vector<Interface> found = selectInterfaces(spec ? spec : "");
  if (found.empty())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        spec ? "no network interface with an address matches COLL_SOCKET_IFNAME=%s"
             : "no network interface with an address is up%s",
        spec ? spec : "");
  return found.front().address;
}

Socket &Socket::operator=(Socket &&other) noexcept {
  if (this != &other) {
    if (fd >= 0)
      ::close(fd);
    fd = other.fd;
    other.fd = -1;
  }
  return *this;
}

Socket::~Socket() {
  if (fd >= 0)
    ::close(fd);
}

llvm::Expected<Socket> Socket::listen(const SockAddr &address, SockAddr &bound) {
  Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid())
    return sysError("cannot create a socket");
  int one = 1;
  setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd, address.get(), address.length) != 0)
    return sysError("cannot listen on " + address.str());
  if (::listen(s.fd, 1024) != 0)
    return sysError("cannot listen on " + address.str());
  bound = address;
  bound.length = sizeof bound.storage;
  if (getsockname(s.fd, reinterpret_cast<sockaddr *>(&bound.storage), &bound.length) != 0)
    return sysError("cannot read the address of a listening socket");
  return s;
}

llvm::Expected<Socket> Socket::connect(const SockAddr &address, Deadline deadline) {
  int attempt = 0;
  for (;;) {
    Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid())
      return sysError("cannot create a socket");
    if (::connect(s.fd, address.get(), address.length) == 0) {
      int one = 1;
      setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return s;
    }
    int err = errno;
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN || err == ENETUNREACH ||
                 err == EHOSTUNREACH || err == EINTR;
    if (!retry || std::chrono::steady_clock::now() >= deadline) {
      errno = err;
      return sysError("cannot connect to " + address.str());
    }
    // The peer may not listen yet: back off up to 100 ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 << std::min(attempt++, 7), 100)));
  }
}

llvm::Expected<Socket> Socket::accept(Deadline deadline) const {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int timeout = msLeft(deadline);
    int rc = ::poll(&p, 1, timeout);
    if (rc < 0 && errno != EINTR)
      return sysError("cannot wait for a connection");
    if (rc > 0) {
      int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return Socket(c);
      }
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
        return sysError("cannot accept a connection");
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return llvm::createStringError(std::make_error_code(std::errc::timed_out),
                                     "timed out waiting for a connection");
  }
}

llvm::Error Socket::sendAll(const void *data, size_t bytes, Deadline deadline) const {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (errno == EPIPE || errno == ECONNRESET)
        return llvm::createStringError(std::make_error_code(std::errc::connection_reset),
                                       "the peer closed the connection");
      return sysError("cannot send");
    }
    pollfd pfd{fd, POLLOUT, 0};
    if (::poll(&pfd, 1, msLeft(deadline)) == 0 && std::chrono::steady_clock::now() >= deadline)
      return llvm::createStringError(std::make_error_code(std::errc::timed_out),
                                     "timed out sending to a peer");
  }
  return llvm::Error::success();
}

llvm::Error Socket::recvAll(void *data, size_t bytes, Deadline deadline) const {
  char *p = static_cast<char *>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0)
      return llvm::createStringError(std::make_error_code(std::errc::connection_reset),
                                     "the peer closed the connection");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (errno == ECONNRESET)
        return llvm::createStringError(std::make_error_code(std::errc::connection_reset),
                                       "the peer closed the connection");
      return sysError("cannot receive");
    }
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, msLeft(deadline)) == 0 && std::chrono::steady_clock::now() >= deadline)
      return llvm::createStringError(std::make_error_code(std::errc::timed_out),
                                     "timed out waiting for a peer");
  }
  return llvm::Error::success();
}

} // namespace coll::rt
