// A list answered from the watch cache, read as one body without assembling it: the response's
// head (`ApiResponse::body`), its items' cached JSON separated by commas, then its tail.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "server/http_types.hpp"

namespace kwatch::server {

// The largest single write of a gathered answer over HTTP/1.1: large writes are far cheaper
// than gathering thousands of small item buffers. (32 KiB on the low-priority threads, so that
// each write is a shorter stretch of kernel time, made no difference to another level's
// latency under a CPU flood: bench/RESULTS.md, session 36.)
inline constexpr std::size_t kWriteSlice = 256 * 1024;

class GatheredBody {
 public:
  explicit GatheredBody(const ApiResponse& response);

  // Its length in bytes.
  static std::size_t length(const ApiResponse& response);

  bool done() const { return piece_ > last_; }
  // The next stretch of the body: at most `max` bytes (max > 0), never across two of its
  // pieces; empty once done.
  std::string_view next(std::size_t max);
  // Appends to `out` until it holds `limit` bytes or the body is done.
  void fill(std::string& out, std::size_t limit);

 private:
  std::string_view piece(std::size_t p) const;
  // Past every piece read to its end (and empty ones): done() is true once the last byte is out.
  void skip_read();

  const ApiResponse& response_;
  std::size_t last_;  // the tail's piece: 0 the head, then items and commas alternately
  std::size_t piece_ = 0;
  std::size_t offset_ = 0;
};

}  // namespace kwatch::server
