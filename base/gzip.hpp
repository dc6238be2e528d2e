// gzip for HTTP bodies (Content-Encoding: gzip): the server compresses large responses as
// kube-apiserver does, the client library inflates them. Inflating is bounded: a body that would
// grow past `max_bytes` is an error (a small compressed body can claim gigabytes), as is a
// truncated or corrupt one.
//
// gunzip and gzip are pure functions, safe from any thread; a Deflater is one body's state and
// is not thread-safe.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace kwatch::base {

// Inflates `compressed` into `out`: "" when done, else why not.
std::string gunzip(std::string_view compressed, std::size_t max_bytes, std::string& out);

// Compresses pieces as they come; finish() returns the whole gzip body. `level` 1 is the fastest
// (what kube-apiserver compresses responses with), 9 the smallest.
class Deflater {
 public:
  explicit Deflater(std::size_t expected_input, int level = 1);
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  void add(std::string_view piece);
  std::string finish();

 private:
  void run(int flush);

  z_stream z_{};
  std::string out_;
};

// `data` as one gzip body at `level`.
std::string gzip(std::string_view data, int level = 1);

}  // namespace kwatch::base
