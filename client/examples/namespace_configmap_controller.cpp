// kwatch-namespace-configmap: a small controller on the client library. It keeps one ConfigMap,
// NAME, with the given data in every namespace (as kube-controller-manager keeps
// kube-root-ca.crt): created where it is missing, put back when it is changed or deleted.
//
//   kwatch-namespace-configmap --name cluster-info --data region=eu --data tier=gold
//       [--kubeconfig FILE] [--context NAME] [--workers 2]
//
// Two informers (namespaces; ConfigMaps of that name in all namespaces, by field selector) feed
// a rate-limited work queue of namespace names; workers reconcile one namespace at a time: read
// the informers' stores, write only when something differs (a create, or an update guarded by
// the resourceVersion it read), and on any failure re-queue the namespace with its own backoff
// (a conflict too, quietly: the newer version is on its way to the mirror). Each write or
// failure prints one line: `created ns`, `updated ns`, `retry ns (N): why`. SIGINT/SIGTERM stop
// it.
#include "client/informer.hpp"
#include "client/work_queue.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/serialize.hpp>

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace kwatch::client;

namespace {

const char* kUsage =
    "usage: kwatch-namespace-configmap --name NAME --data KEY=VALUE [--data ...]\n"
    "                                  [--kubeconfig FILE] [--context NAME] [--workers N]\n";

std::mutex print_mutex;

void say(const std::string& line) {
  std::lock_guard lock(print_mutex);
  std::cout << line << std::endl;
}

const json::value* metadata_field(const json::object& o, std::string_view field) {
  const json::value* meta = o.if_contains("metadata");
  return meta != nullptr && meta->is_object() ? meta->get_object().if_contains(field) : nullptr;
}

class Controller {
 public:
  Controller(std::shared_ptr<HttpClient> client, std::string name, json::object data)
      : client_(std::move(client)), name_(std::move(name)), data_(std::move(data)) {
    ReflectorOptions namespaces;
    namespaces.path = "/api/v1/namespaces";
    namespaces_ = std::make_unique<Informer>(client_, namespaces);
    ReflectorOptions configmaps;
    configmaps.path = "/api/v1/configmaps";
    configmaps.field_selector = "metadata.name=" + name_;
    configmaps_ = std::make_unique<Informer>(client_, configmaps);
    namespaces_->add_handler([this](EventType type, const Store::Object& o, const Store::Object&) {
      if (type != EventType::deleted) queue_.add(Store::key_of(*o));
    });
    configmaps_->add_handler([this](EventType, const Store::Object& o, const Store::Object&) {
      const json::value* ns = metadata_field(*o, "namespace");
      if (ns != nullptr && ns->is_string()) queue_.add(std::string(ns->get_string()));
    });
  }

  void run(asio::io_context& ioc, unsigned workers) {
    asio::co_spawn(ioc, namespaces_->run(), asio::detached);
    asio::co_spawn(ioc, configmaps_->run(), asio::detached);
    for (unsigned i = 0; i < workers; ++i) {
      threads_.emplace_back([this, &ioc] {
        // Reconciles wait for both mirrors: a decision on half a picture would undo work.
        while (!namespaces_->wait_for_cache_sync(std::chrono::milliseconds(100)) ||
               !configmaps_->wait_for_cache_sync(std::chrono::milliseconds(100))) {
          if (stopped_) return;
        }
        while (auto ns = queue_.get()) {
          auto outcome = asio::co_spawn(ioc, reconcile(*ns), asio::use_future).get();
          if (outcome.empty()) {
            queue_.forget(*ns);
          } else if (outcome == "conflict") {
            queue_.add_rate_limited(*ns);
          } else {
            queue_.add_rate_limited(*ns);
            say("retry " + *ns + " (" + std::to_string(queue_.requeues(*ns)) + "): " + outcome);
          }
          queue_.done(*ns);
        }
      });
    }
  }

  void stop() {
    stopped_ = true;
    queue_.shut_down();
    namespaces_->stop();
    configmaps_->stop();
    for (auto& t : threads_) t.join();
  }

 private:
  // "" when the namespace is as wanted; "conflict", or why it failed.
  asio::awaitable<std::string> reconcile(std::string ns) {
    auto namespace_object = namespaces_->store()->get(ns);
    if (!namespace_object) co_return "";  // gone: nothing to keep
    const json::value* phase = namespace_object->if_contains("status");
    if (phase != nullptr && phase->is_object()) {
      const json::value* p = phase->get_object().if_contains("phase");
      if (p != nullptr && p->is_string() && p->get_string() == "Terminating") co_return "";
    }
    auto current = configmaps_->store()->get(ns + "/" + name_);
    const std::string collection = "/api/v1/namespaces/" + ns + "/configmaps";
    json::object wanted{{"apiVersion", "v1"}, {"kind", "ConfigMap"},
                        {"metadata", {{"name", name_}, {"namespace", ns}}}, {"data", data_}};
    if (!current) {
      auto r = co_await client_->request("POST", collection, json::serialize(wanted));
      if (r) {
        say("created " + ns);
        co_return "";
      }
      // Created meanwhile (its event is on the way): the next reconcile compares it.
      if (r.error().is(409)) co_return "conflict";
      co_return r.error().describe();
    }
    const json::value* data = current->if_contains("data");
    if (data != nullptr && data->is_object() && data->get_object() == data_) co_return "";
    const json::value* rv = metadata_field(*current, "resourceVersion");
    if (rv != nullptr) wanted["metadata"].as_object()["resourceVersion"] = *rv;
    auto r = co_await client_->request("PUT", collection + "/" + name_, json::serialize(wanted));
    if (r) {
      say("updated " + ns);
      co_return "";
    }
    if (r.error().is(409) || r.error().is(404)) co_return "conflict";
    co_return r.error().describe();
  }

  std::shared_ptr<HttpClient> client_;
  std::string name_;
  json::object data_;
  std::unique_ptr<Informer> namespaces_;
  std::unique_ptr<Informer> configmaps_;
  WorkQueue queue_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
};

}  // namespace

int main(int argc, char** argv) {
  // SIGINT and SIGTERM are taken by sigwait below: blocked before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::string name, kubeconfig, context;
  json::object data;
  unsigned workers = 2;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i + 1 >= args.size()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    const std::string& flag = args[i];
    const std::string& value = args[++i];
    if (flag == "--name") {
      name = value;
    } else if (flag == "--data" && value.find('=') != std::string::npos) {
      data[value.substr(0, value.find('='))] = value.substr(value.find('=') + 1);
    } else if (flag == "--kubeconfig") {
      kubeconfig = value;
    } else if (flag == "--context") {
      context = value;
    } else if (flag == "--workers" && std::atoi(value.c_str()) > 0) {
      workers = static_cast<unsigned>(std::atoi(value.c_str()));
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (name.empty() || data.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  auto config = kubeconfig.empty() ? load_default_kubeconfig(context)
                                   : load_kubeconfig({kubeconfig}, context);
  if (!config) {
    std::fprintf(stderr, "kwatch-namespace-configmap: %s\n", config.error().c_str());
    return 1;
  }
  asio::io_context ioc;
  auto client = HttpClient::create(ioc.get_executor(), *config);
  if (!client) {
    std::fprintf(stderr, "kwatch-namespace-configmap: %s\n", client.error().c_str());
    return 1;
  }
  auto work = asio::make_work_guard(ioc);
  std::thread io([&ioc] { ioc.run(); });
  Controller controller(*client, name, std::move(data));
  controller.run(ioc, workers);
  // Until a signal: the controller and the I/O thread then stop in order.
  int received = 0;
  sigwait(&signals, &received);
  controller.stop();
  work.reset();
  ioc.stop();
  io.join();
  return 0;
}
