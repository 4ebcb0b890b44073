//===- Socket.h - TCP for the bootstrap ----------------------------*- C++ -*-===//
//
// Addresses, interface selection with NCCL's COLL_SOCKET_IFNAME syntax, and
// blocking TCP with deadlines, for the bootstrap only (data never goes over
// these sockets).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_SOCKET_H
#define COLL_RUNTIME_SOCKET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>

namespace coll::rt {

/// An IPv4 or IPv6 socket address in a fixed-size form (it travels inside
/// the unique id and bootstrap messages).
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;

  bool valid() const { return length != 0; }
  uint16_t port() const;
  void setPort(uint16_t port);
  std::string str() const;
  const sockaddr *get() const { return reinterpret_cast<const sockaddr *>(&storage); }
};

/// "host:port", "[v6]:port" or "host" (port 0), resolved numerically or by
/// name.
llvm::Expected<SockAddr> parseAddress(llvm::StringRef text);

/// One interface with an address.
struct Interface {
  std::string name;
  SockAddr address;
};

/// Interfaces whose names match COLL_SOCKET_IFNAME's `spec` (NCCL syntax: a
/// comma-separated list of prefixes; `^` excludes the list; `=` makes the
/// names exact). An empty spec picks every interface but loopback and
/// docker ones, or loopback when there is no other.
std::vector<Interface> selectInterfaces(llvm::StringRef spec);

/// The address to listen on for bootstrap traffic: COLL_SOCKET_IFNAME's
/// first match (port 0), or an error naming what was looked for.
llvm::Expected<SockAddr> bootstrapAddress();

using Deadline = std::chrono::steady_clock::time_point;

/// A connected or listening TCP socket; closed on destruction.
class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : fd(fd) {}
  Socket(Socket &&other) noexcept : fd(other.fd) { other.fd = -1; }
  Socket &operator=(Socket &&other) noexcept;
  ~Socket();

  /// Listens on `address` (its port 0: any); `bound` gets the real address.
  static llvm::Expected<Socket> listen(const SockAddr &address, SockAddr &bound);
  /// Connects, retrying refused connections until `deadline`.
  static llvm::Expected<Socket> connect(const SockAddr &address, Deadline deadline);
  /// Accepts one connection, waiting until `deadline`.
  llvm::Expected<Socket> accept(Deadline deadline) const;

  llvm::Error sendAll(const void *data, size_t bytes, Deadline deadline) const;
  /// Fails on EOF ("the peer closed the connection") or at the deadline.
  llvm::Error recvAll(void *data, size_t bytes, Deadline deadline) const;

  int get() const { return fd; }
  bool valid() const { return fd >= 0; }

private:
  int fd = -1;
};

} // namespace coll::rt

#endif // COLL_RUNTIME_SOCKET_H
