// Response compression as kube-apiserver does it (APIResponseCompression, on by default): a
// response of 128 KiB or more to a client whose Accept-Encoding takes gzip is sent gzip'ed at
// level 1 (the fastest), with `Content-Encoding: gzip` and `Vary: Accept-Encoding`. Watches are
// never compressed.
//
// Not thread-safe: one Deflater per response.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace kwatch::server {

inline constexpr std::size_t kGzipThreshold = 128 * 1024;

// Whether an Accept-Encoding header takes gzip (a "gzip" token whose q is not 0).
bool accepts_gzip(std::string_view accept_encoding);

// Compresses pieces as they come; finish() returns the whole gzip body.
class Deflater {
 public:
  explicit Deflater(std::size_t expected_input);
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

}  // namespace kwatch::server
