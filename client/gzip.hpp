// gzip for HTTP bodies (Content-Encoding: gzip), as kube-apiserver compresses large responses
// for clients that accept it. Inflating is bounded: a body that would grow past `max_bytes` is
// an error (a small compressed body can claim gigabytes), as is a truncated or corrupt one.
//
// Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kwatch::client {

// Inflates `compressed` into `out`: "" when done, else why not.
std::string gunzip(std::string_view compressed, std::size_t max_bytes, std::string& out);
// gzip at `level` (1: fastest, as kube-apiserver compresses responses; 9: smallest).
std::string gzip(std::string_view data, int level = 1);

}  // namespace kwatch::client
