#include "server/gathered_body.hpp"

#include <algorithm>

#include "watch/watch_types.hpp"

namespace kwatch::server {

GatheredBody::GatheredBody(const ApiResponse& response)
    : response_(response), last_(response.items.empty() ? 1 : 2 * response.items.size()) {
  skip_read();
}

void GatheredBody::skip_read() {
  while (piece_ <= last_ && offset_ >= piece(piece_).size()) {
    ++piece_;
    offset_ = 0;
  }
}

std::size_t GatheredBody::length(const ApiResponse& response) {
  std::size_t length = response.body.size() + response.tail.size();
  for (const auto& item : response.items) length += item->json.size() + 1;
  if (!response.items.empty()) --length;  // n items, n - 1 commas
  return length;
}

std::string_view GatheredBody::piece(std::size_t p) const {
  if (p == 0) return response_.body;
  if (p == last_) return response_.tail;
  return p % 2 == 1 ? std::string_view(response_.items[(p - 1) / 2]->json) : std::string_view(",");
}

std::string_view GatheredBody::next(std::size_t max) {
  if (done()) return {};
  const std::string_view v = piece(piece_);
  const std::string_view out = v.substr(offset_, std::min(max, v.size() - offset_));
  offset_ += out.size();
  skip_read();
  return out;
}

void GatheredBody::fill(std::string& out, std::size_t limit) {
  while (out.size() < limit && !done()) out += next(limit - out.size());
}

}  // namespace kwatch::server
