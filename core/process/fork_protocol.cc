#include "core/process/fork_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace minrepro {

namespace {

using Clock = std::chrono::steady_clock;

// A field longer than this is a broken peer, not a real argv or environment.
constexpr std::uint32_t kMaxField = 64u << 20;
constexpr std::uint32_t kMaxFields = 1u << 20;

void putU32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads exactly n bytes, honouring the deadline between reads.
bool readExact(int fd, char* buf, std::size_t n, const std::optional<Clock::time_point>& deadline) {
  while (n > 0) {
    if (deadline && !waitReadable(fd, *deadline)) return false;
    const ssize_t got = ::read(fd, buf, n);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

bool readU32(int fd, std::uint32_t& v, const std::optional<Clock::time_point>& deadline) {
  unsigned char b[4];
  if (!readExact(fd, reinterpret_cast<char*>(b), 4, deadline)) return false;
  v = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
  return true;
}

bool readField(int fd, std::string& s, const std::optional<Clock::time_point>& deadline) {
  std::uint32_t len = 0;
  if (!readU32(fd, len, deadline) || len > kMaxField) return false;
  s.resize(len);
  return readExact(fd, s.data(), len, deadline);
}

}  // namespace

std::string ForkMessage::get(const std::string& key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return v;
  return "";
}

std::vector<std::string> ForkMessage::all(const std::string& key) const {
  std::vector<std::string> values;
  for (const auto& [k, v] : fields)
    if (k == key) values.push_back(v);
  return values;
}

bool waitReadable(int fd, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    struct pollfd p {
      fd, POLLIN, 0
    };
    const int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, std::min<long long>(left, 1 << 30))));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

bool sendMessage(int fd, const ForkMessage& message) {
  std::string out;
  putU32(out, static_cast<std::uint32_t>(message.fields.size() * 2));
  for (const auto& [k, v] : message.fields) {
    putU32(out, static_cast<std::uint32_t>(k.size()));
    out += k;
    putU32(out, static_cast<std::uint32_t>(v.size()));
    out += v;
  }
  const char* p = out.data();
  std::size_t left = out.size();
  while (left > 0) {
    const ssize_t n = ::send(fd, p, left, MSG_NOSIGNAL);  // a dead peer is an error, not SIGPIPE
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

namespace {

// One byte with room for one passed fd, as sendmsg and recvmsg want it.
struct FdCarrier {
  char byte = 'F';
  struct iovec iov {
    &byte, 1
  };
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg {};
  FdCarrier() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdCarrier(const FdCarrier&) = delete;
  FdCarrier& operator=(const FdCarrier&) = delete;
};

}  // namespace

bool sendFd(int sock, int fd) {
  FdCarrier carrier;
  struct cmsghdr* c = CMSG_FIRSTHDR(&carrier.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  for (;;) {
    const ssize_t n = ::sendmsg(sock, &carrier.msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n == 1;
  }
}

int receiveFd(int sock, Clock::time_point deadline) {
  if (!waitReadable(sock, deadline)) return -1;
  FdCarrier carrier;
  ssize_t n;
  do n = ::recvmsg(sock, &carrier.msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  const struct cmsghdr* c = n == 1 ? CMSG_FIRSTHDR(&carrier.msg) : nullptr;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
    return -1;
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

std::optional<ForkMessage> receiveMessage(int fd, std::optional<Clock::time_point> deadline) {
  std::uint32_t count = 0;
  if (!readU32(fd, count, deadline) || count % 2 != 0 || count > kMaxFields) return std::nullopt;
  ForkMessage m;
  for (std::uint32_t i = 0; i < count; i += 2) {
    std::string k, v;
    if (!readField(fd, k, deadline) || !readField(fd, v, deadline)) return std::nullopt;
    m.add(std::move(k), std::move(v));
  }
  return m;
}

}  // namespace minrepro
