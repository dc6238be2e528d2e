#include "server/response_gzip.hpp"

#include <boost/beast/core/string.hpp>

#include <cstdlib>
#include <new>

namespace kwatch::server {

bool accepts_gzip(std::string_view header) {
  while (!header.empty()) {
    const auto comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    auto trim = [](std::string_view s) {
      while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
      while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
      return s;
    };
    const auto semi = item.find(';');
    const std::string_view coding = trim(item.substr(0, semi));
    if (!boost::beast::iequals(coding, "gzip")) continue;
    if (semi == std::string_view::npos) return true;
    std::string_view param = trim(item.substr(semi + 1));
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') return true;
    param.remove_prefix(2);
    // q=0, q=0.0, q=0.000: refused; anything else takes it.
    return param.find_first_not_of("0.") != std::string_view::npos;
  }
  return false;
}

Deflater::Deflater(std::size_t expected_input) {
  // 16 + MAX_WBITS: the gzip wrapper; level 1, as kube-apiserver.
  if (deflateInit2(&z_, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
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

}  // namespace kwatch::server
