#include "server/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/error.h"

namespace etude::server {

namespace {

constexpr const char* kForms = "use tcp://HOST:PORT, unix://PATH or stdio://";

std::string peer_name(const sockaddr_storage& addr) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
    }
    if (addr.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        std::string name = "[";  // appended, not added: GCC 12 warns wrongly on a + chain here
        name.append(host).append("]:").append(std::to_string(ntohs(a->sin6_port)));
        return name;
    }
    return "unix";
}

// A client that connects and resets before accept() would block a blocking
// accept; non-blocking, accept() then finds nothing and the loop goes on.
void make_nonblocking(int fd) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

Endpoint parse_endpoint(const std::string& uri) {
    Endpoint e;
    if (uri == "stdio://") {
        e.kind = Endpoint::Kind::Stdio;
        return e;
    }
    if (uri.rfind("unix://", 0) == 0) {
        e.kind = Endpoint::Kind::Unix;
        e.path = uri.substr(7);
        if (e.path.empty()) throw Error("'" + uri + "' names no socket path; " + kForms);
        if (e.path.size() >= sizeof(sockaddr_un::sun_path))
            throw Error("socket path '" + e.path + "' is too long");
        return e;
    }
    if (uri.rfind("tcp://", 0) != 0) throw Error("unknown address '" + uri + "': " + kForms);
    const std::string rest = uri.substr(6);
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon + 1 == rest.size())
        throw Error("'" + uri + "' has no port: " + kForms);
    e.host = rest.substr(0, colon);
    if (e.host.size() >= 2 && e.host.front() == '[' && e.host.back() == ']')
        e.host = e.host.substr(1, e.host.size() - 2);
    if (e.host.empty()) e.host = "0.0.0.0";
    const std::string port = rest.substr(colon + 1);
    if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
        std::stoi(port) > 65535)
        throw Error("'" + port + "' in '" + uri + "' is not a port number (0-65535)");
    e.port = std::stoi(port);
    return e;
}

Listener::Listener(const Endpoint& endpoint) : endpoint_(endpoint) {
    if (endpoint.kind == Endpoint::Kind::Unix) {
        fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) throw Error(std::string("cannot make a Unix socket: ") + std::strerror(errno));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, endpoint.path.c_str(), sizeof addr.sun_path - 1);
        ::unlink(endpoint.path.c_str());  // a stale socket from an earlier run
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
            ::listen(fd_, 128) < 0) {
            const int err = errno;
            ::close(fd_);
            throw Error("cannot listen on unix://" + endpoint.path + ": " + std::strerror(err));
        }
        address_ = "unix://" + endpoint.path;
        make_nonblocking(fd_);
        return;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(endpoint.port);
    if (int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found); rc != 0)
        throw Error("cannot resolve '" + endpoint.host + "': " + ::gai_strerror(rc));
    std::string last_error = "no address";
    for (addrinfo* a = found; a; a = a->ai_next) {
        fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd_ < 0) continue;
        const int one = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd_, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd_, 128) == 0) break;
        last_error = std::strerror(errno);
        ::close(fd_);
        fd_ = -1;
    }
    ::freeaddrinfo(found);
    if (fd_ < 0)
        throw Error("cannot listen on tcp://" + endpoint.host + ":" + port + ": " + last_error);
    make_nonblocking(fd_);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    address_ = "tcp://" + peer_name(bound);
}

Listener::~Listener() {
    if (fd_ >= 0) ::close(fd_);
    if (endpoint_.kind == Endpoint::Kind::Unix) ::unlink(endpoint_.path.c_str());
}

int Listener::accept_now(std::string& peer) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) return -1;
    if (addr.ss_family != AF_UNIX) {
        // Audio chunks go out as they are made; Nagle would hold the first back.
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    peer = endpoint_.kind == Endpoint::Kind::Unix ? "unix" : peer_name(addr);
    return fd;
}

}  // namespace etude::server
