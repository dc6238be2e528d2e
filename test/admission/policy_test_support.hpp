// Helpers of the admission suites: a plugin's judgement of one write, run to completion.
#pragma once

#include "kinds/scheme.hpp"
#include "registry/admission.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::admission::testing {

inline std::shared_ptr<kinds::Scheme> scheme() {
  static const auto s = kinds::Scheme::builtin();
  return s;
}

inline boost::json::object parse(std::string_view text) {
  return boost::json::parse(text).as_object();
}

// One write as the store describes it to the admission stages, with what the plugins report.
struct Write {
  std::shared_ptr<const kinds::ResourceInfo> info;
  std::string ns, name, subresource;
  registry::AdmissionOperation operation = registry::AdmissionOperation::create;
  apimachinery::UserInfo user{"alice", "", {"system:authenticated"}};
  std::optional<boost::json::object> old_object;
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, std::string>> annotations;

  registry::AdmissionAttributes attributes() {
    return {*info, ns, name, subresource, operation, false, &user,
            old_object ? &*old_object : nullptr, &warnings, &annotations};
  }
};

template <class Awaitable>
auto run(Awaitable a) {
  boost::asio::io_context ioc;
  auto f = boost::asio::co_spawn(ioc, std::move(a), boost::asio::use_future);
  ioc.run();
  return f.get();
}

}  // namespace kwatch::admission::testing
