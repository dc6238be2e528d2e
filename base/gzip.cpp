#include "base/gzip.hpp"

#include <zlib.h>

#include <algorithm>
#include <new>

namespace kwatch::base {

std::string gunzip(std::string_view compressed, std::size_t max_bytes, std::string& out) {
  z_stream z{};
  // 16 + MAX_WBITS: a gzip wrapper (not zlib's, not raw deflate).
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return "cannot start inflating";
  out.clear();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  int r = Z_OK;
  while (r != Z_STREAM_END) {
    if (out.size() >= max_bytes) {
      inflateEnd(&z);
      return "a gzip body larger than " + std::to_string(max_bytes) + " bytes inflated";
    }
    const std::size_t chunk = std::min<std::size_t>(64 * 1024, max_bytes - out.size());
    const std::size_t at = out.size();
    out.resize(at + chunk);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    z.avail_out = static_cast<uInt>(chunk);
    r = inflate(&z, Z_NO_FLUSH);
    out.resize(at + chunk - z.avail_out);
    if (r == Z_STREAM_END) break;
    if (r != Z_OK && !(r == Z_BUF_ERROR && z.avail_out == 0)) {
      const std::string why = z.msg != nullptr ? z.msg : "corrupt data";
      inflateEnd(&z);
      return "a gzip body that cannot be inflated: " + why;
    }
    if (r == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      return "a gzip body that ends early";
    }
  }
  const bool trailing = z.avail_in != 0;
  inflateEnd(&z);
  if (trailing) return "bytes after the end of a gzip body";
  return "";
}

Deflater::Deflater(std::size_t expected_input, int level) {
  // 16 + MAX_WBITS: the gzip wrapper.
  if (deflateInit2(&z_, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::bad_alloc();
  }
  out_.reserve(expected_input / 4 + 1024);
}

Deflater::~Deflater() { deflateEnd(&z_); }

void Deflater::run(int flush) {
  // Through a fixed buffer, appended to the output: the output never needs pre-filling.
  unsigned char chunk[64 * 1024];
  for (;;) {
    z_.next_out = chunk;
    z_.avail_out = sizeof chunk;
    const int r = deflate(&z_, flush);
    out_.append(reinterpret_cast<const char*>(chunk), sizeof chunk - z_.avail_out);
    if (flush == Z_FINISH) {
      if (r == Z_STREAM_END || (r != Z_OK && r != Z_BUF_ERROR)) return;
      continue;
    }
    // All input taken and the output buffer not filled: nothing more to take now.
    if (z_.avail_in == 0 && z_.avail_out != 0) return;
    if (r != Z_OK && r != Z_BUF_ERROR) return;
  }
}

void Deflater::add(std::string_view piece) {
  z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
  z_.avail_in = static_cast<uInt>(piece.size());
  run(Z_NO_FLUSH);
}

std::string Deflater::finish() {
  z_.next_in = nullptr;
  z_.avail_in = 0;
  run(Z_FINISH);
  return std::move(out_);
}

std::string gzip(std::string_view data, int level) {
  Deflater deflater(data.size(), level);
  deflater.add(data);
  return deflater.finish();
}

}  // namespace kwatch::base
