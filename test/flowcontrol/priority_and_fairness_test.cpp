#include "flowcontrol/priority_and_fairness.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "flowcontrol/bootstrap.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

namespace kwatch::flowcontrol {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using apimachinery::UserInfo;

json::object parse(std::string_view text) {
  auto v = apimachinery::parse_json(text);
  EXPECT_TRUE(v && v->is_object()) << text;
  return v ? v->get_object() : json::object();
}

RequestDigest resource(const UserInfo& user, std::string verb, std::string group,
                       std::string resource, std::string ns = "") {
  RequestDigest r;
  r.user = &user;
  r.resource_request = true;
  r.verb = std::move(verb);
  r.api_group = std::move(group);
  r.api_version = "v1";
  r.resource = std::move(resource);
  r.namespace_ = std::move(ns);
  return r;
}

std::vector<json::object> all(const std::vector<json::object>& a,
                              const std::vector<json::object>& b) {
  auto out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST(Classification, KubesBootstrapConfiguration) {
  PriorityAndFairness apf(Options{});
  const UserInfo admin{"admin", "", {"system:masters", "system:authenticated"}};
  const UserInfo anonymous{"system:anonymous", "", {"system:unauthenticated"}};
  const UserInfo alice{"alice", "", {"system:authenticated"}};
  const UserInfo node{"system:node:n1", "", {"system:nodes", "system:authenticated"}};
  const UserInfo kcm{"system:kube-controller-manager", "", {"system:authenticated"}};
  const UserInfo system_sa{"system:serviceaccount:kube-system:job-controller", "",
                           {"system:serviceaccounts", "system:authenticated"}};
  const UserInfo app_sa{"system:serviceaccount:apps:web", "",
                        {"system:serviceaccounts", "system:authenticated"}};
  auto fs = [&](const RequestDigest& r) { return apf.classify(r).flow_schema; };
  EXPECT_EQ(fs(resource(admin, "delete", "", "pods", "x")), "exempt");
  EXPECT_TRUE(apf.classify(resource(admin, "get", "", "pods", "x")).exempt);
  RequestDigest probe;
  probe.user = &anonymous;
  probe.verb = "get";
  probe.path = "/readyz";
  EXPECT_EQ(fs(probe), "probes");
  EXPECT_EQ(apf.classify(probe).priority_level, "exempt");
  probe.verb = "post";
  EXPECT_EQ(fs(probe), "global-default");
  EXPECT_EQ(fs(resource(alice, "list", "", "pods", "x")), "global-default");
  EXPECT_EQ(apf.classify(resource(alice, "list", "", "pods", "x")).distinguisher, "alice");
  EXPECT_EQ(fs(resource(node, "update", "", "nodes")), "system-node-high");
  EXPECT_EQ(fs(resource(node, "get", "", "pods", "x")), "system-nodes");
  EXPECT_EQ(fs(resource(kcm, "update", "coordination.k8s.io", "leases", "kube-system")),
            "system-leader-election");
  EXPECT_EQ(fs(resource(kcm, "list", "apps", "deployments", "x")), "kube-controller-manager");
  EXPECT_EQ(apf.classify(resource(kcm, "list", "apps", "deployments", "x")).distinguisher, "x");
  EXPECT_EQ(fs(resource(system_sa, "list", "", "pods", "x")), "kube-system-service-accounts");
  EXPECT_EQ(fs(resource(app_sa, "list", "", "pods", "x")), "service-accounts");
  // A user in neither group still lands in catch-all (kube's fallback).
  const UserInfo nobody{"nobody", "", {}};
  EXPECT_EQ(fs(resource(nobody, "list", "", "pods", "x")), "catch-all");
}

TEST(Limits, SharesDivideTheServersSeatsAsKubeDoes) {
  PriorityAndFairness apf(Options{});
  std::map<std::string, LevelLimits> by_name;
  for (const auto& l : apf.limits()) by_name[l.name] = l;
  // ceil(600 * shares / 245), lendable rounded half away from zero.
  EXPECT_EQ(by_name["catch-all"].nominal, 13);
  EXPECT_EQ(by_name["global-default"].nominal, 49);
  EXPECT_EQ(by_name["global-default"].lower, 24);
  EXPECT_EQ(by_name["leader-election"].nominal, 25);
  EXPECT_EQ(by_name["node-high"].nominal, 98);
  EXPECT_EQ(by_name["node-high"].lower, 73);
  EXPECT_EQ(by_name["system"].nominal, 74);
  EXPECT_EQ(by_name["system"].lower, 50);
  EXPECT_EQ(by_name["workload-high"].nominal, 98);
  EXPECT_EQ(by_name["workload-low"].nominal, 245);
  EXPECT_EQ(by_name["workload-low"].lower, 24);
  EXPECT_EQ(by_name["exempt"].nominal, 0);
  // No borrowing limit: up to the whole server on top.
  EXPECT_EQ(by_name["workload-low"].upper, 245 + 600);
  // With no demand, the current limits split the nominal sum in proportion to the lower limits.
  int sum = 0;
  for (const auto& [name, l] : by_name) {
    if (name != "exempt") sum += l.current;
  }
  EXPECT_NEAR(sum, 602, 4);
}

TEST(Limits, LargestSharesAndPercentagesDoNotOverflow) {
  // kube bounds neither the shares (int32) nor borrowingLimitPercent.
  PriorityAndFairness apf(Options{});
  auto huge = parse(R"({"metadata":{"name":"huge"},"spec":{"type":"Limited","limited":{
      "nominalConcurrencyShares":2147483647,"lendablePercent":100,
      "borrowingLimitPercent":2147483647,"limitResponse":{"type":"Reject"}}}})");
  auto other = parse(R"({"metadata":{"name":"other"},"spec":{"type":"Limited","limited":{
      "nominalConcurrencyShares":2147483647,"limitResponse":{"type":"Reject"}}}})");
  apf.configure({huge, other}, {});
  std::map<std::string, LevelLimits> by_name;
  for (const auto& l : apf.limits()) by_name[l.name] = l;
  EXPECT_EQ(by_name["huge"].nominal, 300);
  EXPECT_EQ(by_name["huge"].lower, 0);
  EXPECT_GT(by_name["huge"].upper, 300);
  EXPECT_EQ(by_name["other"].nominal, 300);
  EXPECT_GE(by_name["huge"].current, 0);
  EXPECT_LE(by_name["huge"].current, by_name["huge"].upper);
}

TEST(Configuration, DanglingSchemasAndMissingMandatoryObjects) {
  PriorityAndFairness apf(Options{});
  auto mine = parse(R"({"metadata":{"name":"mine","uid":"fs-uid"},"spec":{
      "priorityLevelConfiguration":{"name":"gone"},"matchingPrecedence":50,
      "rules":[{"subjects":[{"kind":"User","user":{"name":"alice"}}],
                "resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"],"namespaces":["*"]}]}]}})");
  auto level = parse(R"({"metadata":{"name":"mine-level","uid":"pl-uid"},"spec":{"type":"Limited",
      "limited":{"nominalConcurrencyShares":10,"limitResponse":{"type":"Reject"}}}})");
  auto conditions = apf.configure({level}, {mine});
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].flow_schema, "mine");
  EXPECT_EQ(conditions[0].status, "True");
  EXPECT_EQ(conditions[0].reason, "NotFound");
  EXPECT_EQ(conditions[0].message,
            "This FlowSchema references the PriorityLevelConfiguration object named \"gone\" but "
            "there is no such object");
  const UserInfo alice{"alice", "", {"system:authenticated"}};
  // The dangling schema is not used; nothing else is stored, so the mandatory ones serve.
  EXPECT_EQ(apf.classify(resource(alice, "get", "", "pods", "x")).flow_schema, "catch-all");

  mine["spec"].as_object()["priorityLevelConfiguration"] = json::object{{"name", "mine-level"}};
  conditions = apf.configure({level}, {mine});
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].status, "False");
  EXPECT_EQ(conditions[0].reason, "Found");
  auto c = apf.classify(resource(alice, "get", "", "pods", "x"));
  EXPECT_EQ(c.flow_schema, "mine");
  EXPECT_EQ(c.flow_schema_uid, "fs-uid");
  EXPECT_EQ(c.priority_level_uid, "pl-uid");
  EXPECT_FALSE(c.low_cpu_priority);
  // kwatch's annotation sends the level's requests to the low-priority threads.
  level["metadata"].as_object()["annotations"] =
      json::object{{"flowcontrol.kwatch.io/cpu-priority", "low"}};
  apf.configure({level}, {mine});
  EXPECT_TRUE(apf.classify(resource(alice, "get", "", "pods", "x")).low_cpu_priority);
  level["metadata"].as_object().erase("annotations");
  conditions = apf.configure({level}, {mine});
  // A condition already stored as wanted is not asked for again.
  mine["status"] = json::object{{"conditions", json::array{json::object{
                                     {"type", "Dangling"}, {"status", "False"}, {"reason", "Found"},
                                     {"message", conditions[0].message}}}}};
  EXPECT_TRUE(apf.configure({level}, {mine}).empty());
}

TEST(Configuration, PrecedenceThenNameDecides) {
  PriorityAndFairness apf(Options{});
  auto schema = [](const char* name, int precedence, const char* level) {
    json::object o = parse(R"({"metadata":{},"spec":{"rules":[{"subjects":[{"kind":"Group","group":{"name":"*"}}],
        "nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}]}]}})");
    o["metadata"].as_object()["name"] = name;
    o["spec"].as_object()["matchingPrecedence"] = precedence;
    o["spec"].as_object()["priorityLevelConfiguration"] = json::object{{"name", level}};
    return o;
  };
  const auto& b = bootstrap_objects();
  auto levels = all(b.mandatory_levels, b.suggested_levels);
  apf.configure(levels, {schema("b", 10, "system"), schema("a", 10, "node-high"),
                         schema("c", 5, "exempt")});
  const UserInfo u{"u", "", {"system:authenticated"}};
  RequestDigest r;
  r.user = &u;
  r.verb = "get";
  r.path = "/version";
  // The mandatory exempt schema comes first (precedence 1) but matches only system:masters;
  // then the lowest precedence.
  EXPECT_EQ(apf.classify(r).flow_schema, "c");
  apf.configure(levels, {schema("b", 10, "system"), schema("a", 10, "node-high")});
  // At equal precedence, the name decides.
  EXPECT_EQ(apf.classify(r).flow_schema, "a");
}

TEST(WorkEstimate, ListsByBytesWritesByWatchers) {
  PriorityAndFairness apf(Options{});
  Work list;
  list.kind = Work::Kind::list;
  list.objects = 250;
  list.bytes = 250 * 1000;  // 250 kB: 3 seats of 100 kB
  EXPECT_EQ(apf.estimate(list, "workload-low").initial_seats, 3);
  list.objects = 100000;
  list.bytes = 100000LL * 2000;
  // From the cache at most 1 MB at once: 10 seats.
  EXPECT_EQ(apf.estimate(list, "workload-low").initial_seats, 10);
  // ... and never more than the level's share: max(1, min(ceil(0.15 * 49), 49 / 6)) = 8.
  EXPECT_EQ(apf.estimate(list, "global-default").initial_seats, 8);
  list.limit = 100;  // 100 objects of 2 kB
  EXPECT_EQ(apf.estimate(list, "workload-low").initial_seats, 2);
  list.limit = 0;
  list.from_cache = false;  // from storage the whole 200 MB counts, up to the level's share:
  EXPECT_EQ(apf.estimate(list, "workload-low").initial_seats, 37);  // min(ceil(36.75), 245 / 6)
  list.single = true;
  EXPECT_EQ(apf.estimate(list, "workload-low").initial_seats, 1);
  list.single = false;
  list.objects = 0;
  list.bytes = 0;
  EXPECT_EQ(apf.estimate(list, "global-default").initial_seats, 1);
  list.objects = 10;  // sizes unknown: kube assumes 1.5 MB each
  list.from_cache = true;
  EXPECT_EQ(apf.estimate(list, "workload-low").initial_seats, 10);
  Work write;
  write.kind = Work::Kind::mutating;
  write.watchers = 5;
  EXPECT_EQ(apf.estimate(write, "global-default").final_seats, 0);
  write.watchers = 35;
  auto e = apf.estimate(write, "workload-low");
  EXPECT_EQ(e.initial_seats, 1);
  EXPECT_EQ(e.final_seats, 4);
  EXPECT_EQ(e.additional_latency, 5ms);
  write.watchers = 1000;
  e = apf.estimate(write, "global-default");
  EXPECT_EQ(e.final_seats, 8);
  EXPECT_EQ(e.additional_latency, std::chrono::nanoseconds(62'500'000));  // 100 * 5 ms / 8
}

// A small server: one limited level with 1 seat and one queue, so requests queue behind each
// other; the waits are short.
struct OneSeat {
  OneSeat(std::chrono::milliseconds wait, bool queue = true) {
    Options o;
    o.server_concurrency_limit = 1;
    o.wait_limit = wait;
    apf = std::make_shared<PriorityAndFairness>(o);
    auto level = parse(queue ? R"({"metadata":{"name":"one","uid":"pl"},"spec":{"type":"Limited",
        "limited":{"nominalConcurrencyShares":1,"lendablePercent":0,"borrowingLimitPercent":0,
          "limitResponse":{"type":"Queue","queuing":{"queues":1,"handSize":1,"queueLengthLimit":2}}}}})"
                             : R"({"metadata":{"name":"one","uid":"pl"},"spec":{"type":"Limited",
        "limited":{"nominalConcurrencyShares":1,"lendablePercent":0,"borrowingLimitPercent":0,
          "limitResponse":{"type":"Reject"}}}})");
    auto schema = parse(R"({"metadata":{"name":"all","uid":"fs"},"spec":{
        "priorityLevelConfiguration":{"name":"one"},"matchingPrecedence":10,
        "rules":[{"subjects":[{"kind":"Group","group":{"name":"*"}}],
                  "nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}]}]}})");
    const auto& b = bootstrap_objects();
    std::vector<json::object> levels = b.mandatory_levels;
    levels.push_back(level);
    // catch-all and exempt hold no shares worth a seat here: "one" gets the server's only one.
    for (auto& l : levels) {
      if (apimachinery::string_member(l.at("metadata").as_object(), "name") == "catch-all") {
        l["spec"].as_object()["limited"].as_object()["nominalConcurrencyShares"] = 0;
      }
    }
    apf->configure(levels, {schema});
  }
  RequestDigest digest() {
    RequestDigest r;
    r.user = &user;
    r.verb = "get";
    r.path = "/x";
    return r;
  }
  // Starts an admission; its result lands in `out`.
  void admit(std::optional<PriorityAndFairness::Admission>& out) {
    asio::co_spawn(ioc, [this, &out]() -> asio::awaitable<void> {
      out = co_await apf->admit(digest(), Work{});
    }, asio::detached);
  }
  void run_until(const std::function<bool()>& done) {
    for (int i = 0; i < 5000 && !done(); ++i) {
      ioc.run_one_for(10ms);
    }
  }
  asio::io_context ioc;
  UserInfo user{"alice", "", {"system:authenticated"}};
  std::shared_ptr<PriorityAndFairness> apf;
};

TEST(Admission, QueuedUntilASeatIsFreeThenRuns) {
  OneSeat s(10s);
  std::optional<PriorityAndFairness::Admission> first, second;
  s.admit(first);
  s.run_until([&] { return first.has_value(); });
  ASSERT_TRUE(first && first->seat);
  EXPECT_EQ(first->classification.flow_schema_uid, "fs");
  EXPECT_EQ(first->classification.priority_level_uid, "pl");
  s.admit(second);
  s.ioc.poll();
  EXPECT_FALSE(second.has_value());  // waiting in the queue
  EXPECT_NE(s.apf->dump_priority_levels().find("one,"), std::string::npos);
  first->seat.reset();  // the first request is done
  s.run_until([&] { return second.has_value(); });
  ASSERT_TRUE(second && second->seat);
  EXPECT_TRUE(second->queued);
}

TEST(Admission, AWaitThatRunsOutIsATimeOut) {
  OneSeat s(50ms);
  std::optional<PriorityAndFairness::Admission> first, second;
  s.admit(first);
  s.run_until([&] { return first.has_value(); });
  s.admit(second);
  s.run_until([&] { return second.has_value(); });
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(second->seat);
  EXPECT_EQ(second->reject_reason, "time-out");
  EXPECT_GE(second->retry_after, 1);
  EXPECT_NE(s.apf->dump_priority_levels().find("1,                0"), std::string::npos)
      << s.apf->dump_priority_levels();
}

TEST(Admission, AFullQueueAndARejectingLevelRefuseAtOnce) {
  OneSeat queued(10s);
  std::optional<PriorityAndFairness::Admission> a, b, c, d;
  queued.admit(a);
  queued.run_until([&] { return a.has_value(); });
  queued.admit(b);
  queued.admit(c);
  queued.admit(d);  // the queue holds two
  queued.run_until([&] { return d.has_value(); });
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->reject_reason, "queue-full");
  EXPECT_FALSE(b.has_value());

  OneSeat rejecting(10s, false);
  std::optional<PriorityAndFairness::Admission> x, y;
  rejecting.admit(x);
  rejecting.run_until([&] { return x.has_value(); });
  rejecting.admit(y);
  rejecting.run_until([&] { return y.has_value(); });
  ASSERT_TRUE(x && x->seat);
  ASSERT_TRUE(y.has_value());
  EXPECT_EQ(y->reject_reason, "concurrency-limit");
  // Clean up the waiters of the first server: give back the seat, let the queue drain.
  a->seat.reset();
  queued.run_until([&] { return b.has_value(); });
  b->seat.reset();
  queued.run_until([&] { return c.has_value(); });
  EXPECT_TRUE(c && c->seat);
}

// Requests at two levels admitted and finished from four threads while the configuration
// changes under them (a level added and removed, so it quiesces and goes with its last request)
// and the limits are recomputed: every admission ends, every seat comes back, nothing waits
// forever. (Each level has a lock of its own; the map of levels another.)
TEST(Admission, LevelsConfiguredWhileRequestsComeAndGo) {
  Options o;
  o.server_concurrency_limit = 40;
  o.wait_limit = 2s;
  auto apf = std::make_shared<PriorityAndFairness>(o);
  const auto& b = bootstrap_objects();
  auto levels = all(b.mandatory_levels, b.suggested_levels);
  auto schemas = all(b.mandatory_schemas, b.suggested_schemas);
  auto extra_level = parse(R"({"metadata":{"name":"extra","uid":"x"},"spec":{"type":"Limited",
      "limited":{"nominalConcurrencyShares":5,"limitResponse":{"type":"Queue",
        "queuing":{"queues":4,"handSize":2,"queueLengthLimit":50}}}}})");
  auto extra_schema = parse(R"({"metadata":{"name":"extra","uid":"xs"},"spec":{
      "priorityLevelConfiguration":{"name":"extra"},"matchingPrecedence":100,
      "distinguisherMethod":{"type":"ByUser"},
      "rules":[{"subjects":[{"kind":"User","user":{"name":"bob"}}],
                "nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}]}]}})");
  auto with_extra = [&](bool on) {
    auto l = levels;
    auto s = schemas;
    if (on) {
      l.push_back(extra_level);
      s.push_back(extra_schema);
    }
    apf->configure(l, s);
  };
  with_extra(true);

  UserInfo alice{"alice", "", {"system:authenticated"}};
  UserInfo bob{"bob", "", {"system:authenticated"}};
  asio::io_context ioc;
  std::atomic<int> done{0}, admitted{0};
  constexpr int kWorkers = 16, kEach = 1500;
  for (int w = 0; w < kWorkers; ++w) {
    asio::co_spawn(ioc, [&, w]() -> asio::awaitable<void> {
      RequestDigest r;
      r.user = w % 2 ? &bob : &alice;
      r.verb = "get";
      r.path = "/healthz/x";
      asio::steady_timer pause(co_await asio::this_coro::executor);
      for (int i = 0; i < kEach; ++i) {
        auto admission = co_await apf->admit(r, Work{});
        if (admission.seat) {
          ++admitted;
          pause.expires_after(std::chrono::microseconds(50 + (i % 7) * 20));
          co_await pause.async_wait(asio::use_awaitable);
        }
      }
      ++done;
    }, asio::detached);
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&ioc] { ioc.run(); });
  int rounds = 0;
  for (; done < kWorkers && rounds < 20000; ++rounds) {
    with_extra(rounds % 2 == 1);
    apf->adjust_borrowing();
    (void)apf->dump_priority_levels();
    std::this_thread::sleep_for(1ms);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done, kWorkers);
  EXPECT_GT(admitted, 0);
  EXPECT_GT(rounds, 10) << "the configuration changed while requests ran";
  // Every seat given back: no level has a request executing or waiting.
  std::istringstream dump(apf->dump_priority_levels());
  std::string line;
  std::getline(dump, line);  // header
  while (std::getline(dump, line)) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) {
      cells.push_back(cell.substr(cell.find_first_not_of(' ')));
    }
    ASSERT_GE(cells.size(), 6u) << line;
    EXPECT_EQ(cells[4], "0") << line;  // WaitingRequests
    EXPECT_EQ(cells[5], "0") << line;  // ExecutingRequests
  }
}

TEST(Dumps, KubesColumns) {
  PriorityAndFairness apf(Options{});
  const std::string levels = apf.dump_priority_levels();
  EXPECT_EQ(levels.substr(0, levels.find('\n')),
            "PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, "
            "ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, "
            "CancelledRequests");
  EXPECT_NE(levels.find("\nworkload-low,      0,            true,   false,"), std::string::npos)
      << levels;
  const std::string queues = apf.dump_queues();
  EXPECT_EQ(queues.substr(0, queues.find('\n')),
            "PriorityLevelName, Index,  PendingRequests, ExecutingRequests, SeatsInUse, "
            "NextDispatchR, InitialSeatsSum, MaxSeatsSum, TotalWorkSum");
  const std::string requests = apf.dump_requests(true);
  EXPECT_NE(requests.find("StartTime, UserName, Verb,   APIPath,"), std::string::npos)
      << requests;
}

}  // namespace
}  // namespace kwatch::flowcontrol
