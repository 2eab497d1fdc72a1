// Which servers the load tester may talk to. By default only loopback hosts (127.0.0.0/8, ::1,
// localhost): a load test aimed at someone else's server by mistake is an attack, and the CI
// machines must never send traffic elsewhere. --allow-remote lifts this.
#pragma once

#include <string>

namespace shrike::loadtest {

// The host part of an http:// or https:// URL ("[::1]" is returned as "::1"). Throws
// std::invalid_argument naming the URL when it has another scheme or no host.
std::string url_host(const std::string& url);

bool is_loopback_host(const std::string& host);

// Throws std::invalid_argument, naming the URL, unless its host is loopback or allow_remote.
void check_url_allowed(const std::string& url, bool allow_remote);

// base URL (trailing slash ignored) + "/v1/completions" or "/v1/chat/completions".
std::string endpoint_url(const std::string& base, bool chat);
// base + "/v1/intent" (shrike serve of a task model).
std::string intent_url(const std::string& base);

}  // namespace shrike::loadtest
