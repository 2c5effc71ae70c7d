// "HOST[:PORT]" as torchrun's --rdzv_endpoint and etcd's client URLs write it, read once for
// both rendezvous backends (launch/cmd_launch.cpp's c10d endpoint, etcd.h's members).
//
// Contract:
//  - parse_host_port(text, default_port, what): "host", "host:port", "[v6]" or "[v6]:port";
//    the host without brackets and the port (default_port when none). Throws
//    xdino::UsageError naming `what` and the text: no host, an IPv6 address without brackets,
//    a port that is not a TCP port.
#pragma once

#include <string>

namespace xdino::distributed {

struct HostPort {
  std::string host;
  int port = 0;
};

HostPort parse_host_port(const std::string& text, int default_port, const std::string& what);

}  // namespace xdino::distributed
