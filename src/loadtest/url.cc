#include "loadtest/url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <stdexcept>

namespace shrike::loadtest {

std::string url_host(const std::string& url) {
  std::string rest;
  for (const char* scheme : {"http://", "https://"})
    if (url.rfind(scheme, 0) == 0) rest = url.substr(std::string(scheme).size());
  if (rest.empty()) throw std::invalid_argument("URL '" + url + "': expected http://HOST[:PORT]");
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  std::string host;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) throw std::invalid_argument("URL '" + url + "': bad IPv6 host");
    host = rest.substr(1, close - 1);
  } else {
    host = rest.substr(0, rest.find(':'));
  }
  if (host.empty()) throw std::invalid_argument("URL '" + url + "': no host");
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return host;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

void check_url_allowed(const std::string& url, bool allow_remote) {
  const auto host = url_host(url);
  if (!allow_remote && !is_loopback_host(host))
    throw std::invalid_argument("URL '" + url + "': host '" + host +
                                "' is not loopback (127.0.0.0/8, ::1, localhost); pass "
                                "--allow-remote to load-test another machine");
}

std::string endpoint_url(const std::string& base, bool chat) {
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  return b + (chat ? "/v1/chat/completions" : "/v1/completions");
}

std::string intent_url(const std::string& base) {
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  return b + "/v1/intent";
}

}  // namespace shrike::loadtest
