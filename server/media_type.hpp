// Content negotiation of the API's answers: which of the representations kwatch can produce an
// `Accept` header allows (JSON, the default; YAML for single answers), and YAML written from JSON
// for clients that ask for it. Pure functions; safe from any thread.
#pragma once

#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace kwatch::server {

enum class Representation { json, yaml };

// The first media range of `accept` kwatch can answer with (`application/json` with any
// parameters, `application/yaml`, `application/*`, `*/*`; no header means JSON), skipping those
// with q=0; a stream (a watch) has no YAML form. nullopt when none fits: a 406.
std::optional<Representation> negotiate(std::string_view accept, bool stream);

// The media types named in a 406's message.
inline constexpr std::string_view kAcceptedMediaTypes = "application/json, application/yaml";

// `value` as a YAML document (block style, strings quoted where YAML would read them otherwise),
// as kube-apiserver answers `Accept: application/yaml`.
std::string to_yaml(const boost::json::value& value);

}  // namespace kwatch::server
