// The access log: one line per finished request, as JSON lines or as
// space-separated key=value text. Off unless configured (server.accessLog,
// --access-log). Each line is one write(2) with O_APPEND, so lines from the
// I/O threads never interleave; no lock, no buffering across requests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flowcontrol/outcome_response.h"

namespace sluice::server {

struct AccessRecord {
  std::string_view request_id;
  std::string_view method;
  std::string_view path;
  std::string_view flow;  // fairness id ("" for non-inference requests)
  int priority = 0;
  std::string_view objective;
  std::string_view model;
  std::string_view outcome;   // served, a dropped reason, an error code, client-closed
  std::string_view endpoint;  // "" if none was tried
  int status = 0;
  double queue_ms = 0;     // request read -> dispatch decision
  double upstream_ms = 0;  // dispatch -> last byte (0 if never dispatched)
  double total_ms = 0;
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
};

class AccessLog {
 public:
  ~AccessLog();
  // `target`: "-" for standard error, else a file opened for append.
  // Returns false (and `error`) if the file cannot be opened.
  bool open(const std::string& target, const std::string& format, std::string& error);
  bool enabled() const { return fd_ >= 0; }
  // Formats into `scratch` (the caller's, reused) and writes one line.
  void write(const AccessRecord& r, std::string& scratch) const;

 private:
  int fd_ = -1;
  bool owned_ = false;
  bool json_ = true;
};

// The access log's JSON strings are escaped as the error bodies' are.
using flowcontrol::append_json_string;

}  // namespace sluice::server
