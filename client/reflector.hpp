// client-go's Reflector: lists a resource into a Store, then watches it from the list's
// resourceVersion, keeping the store equal to the server's state.
// - The list is paged (`limit`/`continue`); a continue token that expired (410) restarts the list
//   without paging, as client-go does.
// - A watch that ends (the server's timeout, a closed or broken connection) is resumed from the
//   last resourceVersion seen, bookmarks included: no event is lost or applied twice.
// - Only 410 Gone (the version left the server's window) causes a re-list; other failures retry
//   with jittered exponential backoff.
// - Watch lifetimes are randomised ([min, 2 x min)) so that many clients do not reconnect at once.
// - With `streaming_list` (the default) the state comes as a streaming list: one watch with
//   `sendInitialEvents=true` whose ADDED events up to the `k8s.io/initial-events-end` bookmark
//   are the state, and which then goes on as the watch. A server that refuses it (400, 403, 405,
//   422, 501), or twice in a row ends such a stream cleanly before the bookmark, is listed
//   instead from then on.
//
// Thread-safety: `run` on one executor; `stop`, `has_synced` and `last_synced_resource_version`
// from any thread.
#pragma once

#include "client/http_client.hpp"
#include "client/store.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace kwatch::client {

struct ReflectorOptions {
  std::string path;             // the collection, e.g. /api/v1/namespaces/default/configmaps
  std::string label_selector;   // optional
  std::string field_selector;   // optional
  std::size_t page_size = 500;  // 0: one unpaged list
  bool streaming_list = true;   // sendInitialEvents, falling back to a list (see above)
  WatchTransport transport = WatchTransport::chunked;
  std::chrono::seconds min_watch_timeout{300};
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{10'000};
};

struct ReflectorCounters {
  std::atomic<std::uint64_t> lists{0};  // streaming ones included
  std::atomic<std::uint64_t> streaming_lists{0};
  std::atomic<std::uint64_t> watches{0};
  std::atomic<std::uint64_t> events{0};
  std::atomic<std::uint64_t> failures{0};
};

class Reflector : public std::enable_shared_from_this<Reflector> {
 public:
  // Called after each change is applied to the store: the event, and the object it replaced or
  // removed (null if none). After a re-list, objects that disappeared come as DELETED events.
  using Handler = std::function<void(EventType type, const Store::Object& object,
                                     const Store::Object& previous)>;

  Reflector(std::shared_ptr<HttpClient> client, std::shared_ptr<Store> store,
            ReflectorOptions options, Handler handler = nullptr);

  boost::asio::awaitable<void> run();
  void stop();

  bool has_synced() const { return synced_.load(); }
  std::string last_synced_resource_version() const;
  const ReflectorCounters& counters() const { return counters_; }

 private:
  // Returns false when the list failed (and was counted).
  boost::asio::awaitable<bool> list();
  // Watches from the last version until the stream ends; sets relist_ on 410. With relist_ set,
  // a streaming list: the initial events are the state.
  boost::asio::awaitable<void> watch();
  // Replaces the store's contents with a list's (or a streaming list's) items, at version `rv`.
  void apply_list(std::vector<Store::Prepared> items, std::string rv);
  std::string query(bool watching, bool streaming = false) const;
  void set_version(std::string rv);

  std::shared_ptr<HttpClient> client_;
  std::shared_ptr<Store> store_;
  ReflectorOptions options_;
  Handler handler_;
  ReflectorCounters counters_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopped_{false};
  bool relist_ = true;
  bool streaming_ = false;      // options_.streaming_list, until the server shows it cannot
  int streams_cut_short_ = 0;   // streaming lists in a row that ended before the bookmark
  mutable std::mutex version_mutex_;
  std::string version_;
  std::unique_ptr<WatchConnection>* current_ = nullptr;  // the open watch (run's executor only)
  std::mutex current_mutex_;  // guards executor_
  boost::asio::any_io_executor executor_;  // run's, for stop() to close the watch there
};

}  // namespace kwatch::client
