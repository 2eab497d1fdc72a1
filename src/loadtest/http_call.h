// One blocking HTTP exchange over libcurl's easy interface, for the soak's many client threads
// (each its own handle, so keep-alive connections are reused per thread). Unlike the load
// generator's event loop it can send any method, body and path (the soak's malformed requests)
// and hang up mid-response on purpose (a client that leaves a stream).
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace shrike::loadtest {

struct HttpReply {
  long status = 0;  // 0: no response (transport error or hung up before the status line)
  std::string body;
  bool transport_error = false;  // curl failed for a reason other than our own hang-up
  bool hung_up = false;          // the on_data callback asked to stop
  std::string error;             // curl's message when transport_error
  double seconds = 0;            // wall time of the whole exchange
};

class HttpCaller {
 public:
  HttpCaller();
  ~HttpCaller();
  HttpCaller(const HttpCaller&) = delete;
  HttpCaller& operator=(const HttpCaller&) = delete;

  // Sends METHOD url with body (POST/PUT: as application/json; empty for GET). on_data, if set,
  // sees the body received so far after each chunk and returns false to hang up at once (the
  // connection is closed, as a client that leaves). timeout_s bounds the whole exchange.
  HttpReply call(const std::string& method, const std::string& url, const std::string& body,
                 double timeout_s,
                 const std::function<bool(const std::string& body_so_far)>& on_data = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shrike::loadtest
