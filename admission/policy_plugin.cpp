#include "admission/policy_plugin.hpp"

#include "admission/policy_runtime.hpp"

namespace kwatch::admission {

PolicyPluginBase::PolicyPluginBase(std::shared_ptr<kinds::Scheme> scheme,
                                   std::shared_ptr<registry::CacherRegistry> cachers,
                                   std::string version, std::string policy_resource,
                                   std::string binding_resource, Compile compile)
    : scheme_(scheme), cachers_(cachers),
      source_(std::make_shared<PolicySource>(std::move(scheme), std::move(cachers),
                                             std::move(version), std::move(policy_resource),
                                             std::move(binding_resource), compile)) {}

PolicyPluginBase::~PolicyPluginBase() = default;

void PolicyPluginBase::start(boost::asio::any_io_executor executor) { source_->start(executor); }

void PolicyPluginBase::stop() { source_->stop(); }

bool PolicyPluginBase::loaded() const { return source_->current()->loaded; }

bool PolicyPluginBase::move_to_compute(const boost::asio::any_io_executor& current,
                                       std::string_view group, std::string_view resource) const {
  if (!compute_ || current == compute_) return false;
  return source_->current()->may_apply(group, resource, kHeavyCost + 1);
}

void PolicyPluginBase::load(const std::vector<boost::json::object>& policies,
                            const std::vector<boost::json::object>& bindings) {
  source_->load(policies, bindings);
}

}  // namespace kwatch::admission
