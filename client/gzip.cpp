#include "client/gzip.hpp"

#include <zlib.h>

#include <stdexcept>

namespace kwatch::client {

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

std::string gzip(std::string_view data, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace kwatch::client
