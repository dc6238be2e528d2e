#include "server/url.hpp"

namespace kwatch::server {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> Url::param(std::string_view name) const {
  auto it = query.find(std::string(name));
  if (it == query.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<Url> parse_url(std::string_view target) {
  Url url;
  auto q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  auto path = percent_decode(raw_path, false);
  if (!path) return std::nullopt;
  url.path = *path;
  std::string_view rest = url.path;
  while (!rest.empty()) {
    auto slash = rest.find('/');
    auto seg = rest.substr(0, slash);
    if (!seg.empty()) url.segments.emplace_back(seg);
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (q != std::string_view::npos) {
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
      auto amp = query.find('&');
      auto pair = query.substr(0, amp);
      if (!pair.empty()) {
        auto eq = pair.find('=');
        auto key = percent_decode(pair.substr(0, eq), true);
        auto value = eq == std::string_view::npos ? std::optional<std::string>("")
                                                  : percent_decode(pair.substr(eq + 1), true);
        if (!key || !value) return std::nullopt;
        url.query.emplace(std::move(*key), std::move(*value));
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  return url;
}

}  // namespace kwatch::server
