#include "distributed/rendezvous/endpoint.h"

#include <cstdlib>

#include "core/check.h"

namespace xdino::distributed {

HostPort parse_host_port(const std::string& text, int default_port, const std::string& what) {
  std::string host = text, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    XDINO_CHECK_ARG(close != std::string::npos, what, " ", quote(text),
                    ": an IPv6 address opens with '[' and closes with ']'");
    host = text.substr(1, close - 1);
    const std::string rest = text.substr(close + 1);
    XDINO_CHECK_ARG(rest.empty() || rest[0] == ':', what, " ", quote(text),
                    ": expected [ADDRESS]:PORT");
    if (!rest.empty()) port = rest.substr(1);
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    XDINO_CHECK_ARG(text.find(':') == colon, what, " ", quote(text),
                    ": write an IPv6 address in brackets, [ADDRESS]:PORT");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  XDINO_CHECK_ARG(!host.empty() && host.find('/') == std::string::npos, what, " ", quote(text),
                  " names no host");
  if (port.empty()) return {host, default_port};
  char* end = nullptr;
  const long v = std::strtol(port.c_str(), &end, 10);
  XDINO_CHECK_ARG(end != port.c_str() && *end == '\0' && v > 0 && v < 65536, what, " ", quote(text),
                  ": the port is not a TCP port");
  return {host, static_cast<int>(v)};
}

}  // namespace xdino::distributed
