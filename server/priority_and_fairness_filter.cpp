// The filter chain's seat under API Priority and Fairness (flowcontrol/priority_and_fairness.hpp),
// as kube's WithPriorityAndFairness: the request is described as kube's RequestInfo describes it
// (from its path, method and query alone), classified, its work estimated (a list by the objects
// its resource's cache holds, a write by the watchers its event will reach), then admitted, queued
// or refused with 429. A watch holds its seat only while it is set up; long-running requests
// that are not watches (a pod's log, exec, attach, port-forward, proxy) take none. The metrics
// are kube's apiserver_flowcontrol_* families; the dumps are kube's debug endpoints.

#include "server/api_handler.hpp"

#include "kinds/scheme.hpp"
#include "server/request_info.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"
#include "server/url.hpp"
#include "watch/cacher.hpp"

#include <algorithm>

namespace kwatch::server {

using apimachinery::ApiError;
using base::Errc;
namespace asio = boost::asio;

namespace {

bool long_running_subresource(std::string_view s) {
  return s == "attach" || s == "exec" || s == "proxy" || s == "log" || s == "portforward";
}

}  // namespace

void ApiHandler::set_priority_and_fairness(std::shared_ptr<flowcontrol::PriorityAndFairness> apf) {
  apf_ = std::move(apf);
  if (!apf_ || !metrics_) return;
  metrics_->help("apiserver_flowcontrol_rejected_requests_total", "counter",
                 "Requests refused by API Priority and Fairness, by reason.");
  metrics_->help("apiserver_flowcontrol_dispatched_requests_total", "counter",
                 "Requests that began executing.");
  metrics_->help("apiserver_flowcontrol_current_inqueue_requests", "gauge",
                 "Requests waiting in a queue now.");
  metrics_->help("apiserver_flowcontrol_current_executing_requests", "gauge",
                 "Requests executing now (a write until its event is delivered).");
  metrics_->help("apiserver_flowcontrol_current_executing_seats", "gauge",
                 "Seats taken by executing requests now.");
  metrics_->help("apiserver_flowcontrol_request_wait_duration_seconds", "histogram",
                 "How long requests waited in their queue.");
  metrics_->help("apiserver_flowcontrol_nominal_limit_seats", "gauge",
                 "Nominal seats of each priority level.");
  metrics_->help("apiserver_flowcontrol_lower_limit_seats", "gauge",
                 "The least seats a priority level keeps when it lends.");
  metrics_->help("apiserver_flowcontrol_upper_limit_seats", "gauge",
                 "The most seats a priority level may have when it borrows.");
  metrics_->help("apiserver_flowcontrol_current_limit_seats", "gauge",
                 "Seats of each priority level now, after borrowing.");
  std::weak_ptr<Metrics> weak = metrics_;
  apf_->on_limits([weak](const std::vector<flowcontrol::LevelLimits>& limits) {
    auto m = weak.lock();
    if (!m) return;
    for (const auto& l : limits) {
      const Metrics::Labels labels{{"priority_level", l.name}};
      m->set("apiserver_flowcontrol_nominal_limit_seats", labels, l.nominal);
      m->set("apiserver_flowcontrol_lower_limit_seats", labels, l.lower);
      m->set("apiserver_flowcontrol_upper_limit_seats", labels, l.upper);
      m->set("apiserver_flowcontrol_current_limit_seats", labels, l.current);
    }
  });
}

asio::awaitable<std::optional<ApiError>> ApiHandler::take_fair_seat(Exchange& ex) {
  const ApiRequest& request = ex.request;
  flowcontrol::RequestDigest digest;
  digest.user = &ex.route.user;
  digest.path = ex.url.path;
  flowcontrol::Work work;
  std::shared_ptr<const kinds::ResourceInfo> info;
  const auto parsed = parse_request_info(ex.url.segments);
  if (parsed) {
    digest.resource_request = true;
    digest.api_group = parsed->group;
    digest.api_version = parsed->version;
    digest.namespace_ = parsed->ns;
    digest.resource = parsed->resource;
    digest.name = parsed->name;
    digest.subresource = parsed->subresource;
    // The verb authorization sees too (server/request_options.cpp).
    digest.verb = resource_verb(request.method, !parsed->name.empty(),
                                parsed->watch_prefix || truthy(ex.url.param("watch")));
    if (long_running_subresource(parsed->subresource)) co_return std::nullopt;
    info = scheme_->find(parsed->group, parsed->version, parsed->resource);
  } else {
    digest.verb = lowercase_verb(request.method);
  }
  std::shared_ptr<watch::Cacher> cacher = info ? cacher_for(*info) : nullptr;
  if (digest.verb == "list" && cacher) {
    work.kind = flowcontrol::Work::Kind::list;
    work.objects = cacher->object_count();
    work.bytes = cacher->object_bytes();
    if (const auto limit = ex.url.param("limit")) {
      work.limit = std::atoll(limit->c_str());
    }
    // kwatch serves lists from its caches, except a page of a list or an exact version.
    work.from_cache = !ex.url.param("continue") &&
                      ex.url.param("resourceVersionMatch").value_or("") != "Exact";
    work.selector = ex.url.param("labelSelector") || ex.url.param("fieldSelector");
  } else if ((digest.verb == "create" || digest.verb == "update" || digest.verb == "patch" ||
              digest.verb == "delete") &&
             !(digest.resource == "serviceaccounts" && digest.subresource == "token")) {
    work.kind = flowcontrol::Work::Kind::mutating;
    work.watchers = cacher ? cacher->counters().watchers.load() : 0;
  }
  std::shared_ptr<Metrics> metrics = metrics_;
  auto note = [metrics](const flowcontrol::Classification& c, bool in) {
    if (!metrics) return;
    metrics->inc("apiserver_flowcontrol_current_inqueue_requests",
                 {{"flow_schema", c.flow_schema}, {"priority_level", c.priority_level}},
                 in ? 1 : -1);
  };
  auto admission = co_await apf_->admit(std::move(digest), work, std::move(note));
  ex.classification = admission.classification;
  const Metrics::Labels labels{{"flow_schema", admission.classification.flow_schema},
                               {"priority_level", admission.classification.priority_level}};
  if (!admission.seat) {
    if (metrics) {
      Metrics::Labels rejected = labels;
      rejected.emplace_back("reason", admission.reject_reason);
      metrics->inc("apiserver_flowcontrol_rejected_requests_total", rejected);
      if (admission.queued) {
        Metrics::Labels waited = labels;
        waited.emplace_back("execute", "false");
        metrics->observe("apiserver_flowcontrol_request_wait_duration_seconds", waited,
                         std::chrono::duration<double>(admission.waited).count());
      }
    }
    ApiError e(Errc::too_many_requests, "Too many requests, please try again later.");
    e.retry_after_seconds = admission.retry_after;
    co_return e;
  }
  if (metrics) {
    metrics->inc("apiserver_flowcontrol_dispatched_requests_total", labels);
    Metrics::Labels waited = labels;
    waited.emplace_back("execute", "true");
    metrics->observe("apiserver_flowcontrol_request_wait_duration_seconds", waited,
                     std::chrono::duration<double>(admission.waited).count());
    const int seats = admission.work.max_seats();
    metrics->inc("apiserver_flowcontrol_current_executing_requests", labels, 1);
    metrics->inc("apiserver_flowcontrol_current_executing_seats", labels, seats);
    // The gauges come down when the seat is given back.
    auto seat = std::move(admission.seat);
    admission.seat = flowcontrol::PriorityAndFairness::Seat(
        seat.get(), [seat, metrics, labels, seats](void*) {
          metrics->inc("apiserver_flowcontrol_current_executing_requests", labels, -1);
          metrics->inc("apiserver_flowcontrol_current_executing_seats", labels, -seats);
        });
  }
  ex.inflight = std::move(admission.seat);
  co_return std::nullopt;
}

std::optional<ApiResponse> ApiHandler::serve_priority_and_fairness_dump(const Exchange& ex) const {
  const auto& seg = ex.url.segments;
  if (!apf_ || seg.size() != 3 || seg[0] != "debug" || seg[1] != "api_priority_and_fairness") {
    return std::nullopt;
  }
  std::string body;
  if (seg[2] == "dump_priority_levels") {
    body = apf_->dump_priority_levels();
  } else if (seg[2] == "dump_queues") {
    body = apf_->dump_queues();
  } else if (seg[2] == "dump_requests") {
    const auto details = ex.url.param("includeRequestDetails");
    body = apf_->dump_requests(details && !details->empty());
  } else {
    return std::nullopt;
  }
  return text_response(200, std::move(body), "text/plain; charset=utf-8");
}

}  // namespace kwatch::server
