// Fuzzes decode_protobuf_object on whole request bodies ("k8s\0" + runtime.Unknown). Properties:
// no crash or sanitizer report; an error is bad_request or unsupported_media_type; a decoded
// object serializes and parses back to the same value, and carries apiVersion and kind.
#include "schema/protobuf_decoder.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch::schema;
  auto obj = decode_protobuf_object(kwatch::fuzz::as_view(data, size));
  if (!obj) {
    const auto code = obj.error().code;
    if (code != kwatch::base::Errc::bad_request &&
        code != kwatch::base::Errc::unsupported_media_type) {
      kwatch::fuzz::fail("unexpected error code", obj.error().message);
    }
    return 0;
  }
  const boost::json::value v(std::move(*obj));
  kwatch::fuzz::check_serializes(v);
  const auto& o = v.get_object();
  if (!o.contains("kind") || !o.contains("apiVersion")) {
    kwatch::fuzz::fail("decoded object lacks apiVersion or kind", boost::json::serialize(v));
  }
  return 0;
}
