#include "loadtest/http_call.h"

#include <curl/curl.h>

#include <chrono>
#include <cmath>
#include <stdexcept>

namespace shrike::loadtest {
namespace {

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

struct Receive {
  std::string* body;
  const std::function<bool(const std::string&)>* on_data;
  bool hung_up = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Receive*>(user);
  r->body->append(data, size * n);
  if (*r->on_data && !(*r->on_data)(*r->body)) {
    r->hung_up = true;
    return 0;  // curl aborts the transfer and closes the connection
  }
  return size * n;
}

}  // namespace

struct HttpCaller::Impl {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
};

HttpCaller::HttpCaller() : impl_(std::make_unique<Impl>()) {
  // curl_global_init is not thread-safe: the first caller does it, before any thread starts one.
  static CurlGlobal global;
  impl_->easy = curl_easy_init();
  if (!impl_->easy) throw std::runtime_error("curl_easy_init failed");
  for (const char* h : {"Content-Type: application/json", "Expect:"})
    impl_->headers = curl_slist_append(impl_->headers, h);
}

HttpCaller::~HttpCaller() {
  curl_easy_cleanup(impl_->easy);
  curl_slist_free_all(impl_->headers);
}

HttpReply HttpCaller::call(const std::string& method, const std::string& url,
                           const std::string& body, double timeout_s,
                           const std::function<bool(const std::string&)>& on_data) {
  HttpReply reply;
  Receive recv{&reply.body, &on_data};
  char errbuf[CURL_ERROR_SIZE] = {};
  CURL* e = impl_->easy;
  curl_easy_reset(e);  // keeps the connection cache: keep-alive across this thread's requests
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method != "GET") {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.size());
  } else {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, nullptr);
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, impl_->headers);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &recv);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)std::ceil(timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  // Loopback only, as the load generator: no proxy from the environment, no redirects.
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  const auto t0 = std::chrono::steady_clock::now();
  const CURLcode code = curl_easy_perform(e);
  reply.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &reply.status);
  reply.hung_up = recv.hung_up;
  if (code != CURLE_OK && !(recv.hung_up && code == CURLE_WRITE_ERROR)) {
    reply.transport_error = true;
    reply.error = errbuf[0] ? errbuf : curl_easy_strerror(code);
  }
  return reply;
}

}  // namespace shrike::loadtest
