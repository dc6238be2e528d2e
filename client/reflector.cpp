#include "client/reflector.hpp"

#include "base/ascii.hpp"

#include "client/object_meta.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/monotonic_resource.hpp>

#include <map>
#include <random>

namespace kwatch::client {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

std::string escape(std::string_view s) {
  // The unreserved characters of a URL query; everything else %XX.
  return base::percent_encode(s, [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '~';
  });
}

// A watch batch's scratch arena: what one read's events usually take parsed (more comes from the
// heap and goes with the batch).
constexpr std::size_t kScratchBytes = 256 * 1024;

double jitter() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

Reflector::Reflector(std::shared_ptr<HttpClient> client, std::shared_ptr<Store> store,
                     ReflectorOptions options, Handler handler)
    : client_(std::move(client)),
      store_(std::move(store)),
      options_(std::move(options)),
      handler_(std::move(handler)),
      streaming_(options_.streaming_list) {}

std::string Reflector::last_synced_resource_version() const {
  std::lock_guard lock(version_mutex_);
  return version_;
}

void Reflector::set_version(std::string rv) {
  std::lock_guard lock(version_mutex_);
  version_ = std::move(rv);
}

std::string Reflector::query(bool watching, bool streaming) const {
  std::string q = options_.path + "?";
  if (!options_.label_selector.empty()) q += "labelSelector=" + escape(options_.label_selector) + "&";
  if (!options_.field_selector.empty()) q += "fieldSelector=" + escape(options_.field_selector) + "&";
  if (watching) {
    // client-go's spread: [min, 2 x min).
    const auto timeout = static_cast<long>(static_cast<double>(options_.min_watch_timeout.count()) *
                                           (1.0 + jitter()));
    q += "watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(timeout);
    if (streaming) {
      // No version: the state as of now (a consistent read), then what follows.
      q += "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
    } else {
      q += "&resourceVersion=" + escape(last_synced_resource_version());
    }
  }
  return q;
}

asio::awaitable<bool> Reflector::list() {
  ++counters_.lists;
  // Each page is parsed into a scratch arena and its items prepared for the store at once:
  // only the store's own copies outlive the page.
  std::vector<Store::Prepared> items;
  json::monotonic_resource scratch;
  std::string rv;
  std::string token;
  std::size_t page_size = options_.page_size;
  for (;;) {
    scratch.release();
    std::string target = query(false);
    if (page_size > 0) target += "limit=" + std::to_string(page_size) + "&";
    if (!token.empty()) target += "continue=" + escape(token);
    auto page = co_await client_->get(target, json::storage_ptr(&scratch));
    if (!page) {
      if (page.error().is(410) && !token.empty()) {
        // The continue token expired: the whole list again, in one piece.
        items.clear();
        token.clear();
        page_size = 0;
        continue;
      }
      ++counters_.failures;
      co_return false;
    }
    if (json::value* list = page->if_contains("items"); list != nullptr && list->is_array()) {
      for (auto& item : list->get_array()) {
        if (item.is_object()) items.push_back(store_->prepare(std::move(item.get_object())));
      }
    }
    rv = metadata_string(*page, "resourceVersion");
    token = metadata_string(*page, "continue");
    if (token.empty()) break;
  }
  apply_list(std::move(items), std::move(rv));
  co_return true;
}

void Reflector::apply_list(std::vector<Store::Prepared> items, std::string rv) {
  // The objects listed keys had before (for the handler: ADDED or MODIFIED).
  std::map<std::string, Store::Object> before;
  if (handler_) {
    for (const auto& item : items) {
      if (auto previous = store_->get(item.key())) before.emplace(item.key(), std::move(previous));
    }
  }
  auto gone = store_->replace(std::move(items));
  set_version(std::move(rv));
  synced_ = true;
  relist_ = false;
  if (handler_) {
    // What vanished while the watch was broken: DELETED with its last known state (client-go's
    // DeletedFinalStateUnknown).
    for (const auto& object : gone) handler_(EventType::deleted, object, object);
    for (const auto& object : store_->list()) {
      auto it = before.find(Store::key_of(*object));
      const bool known = it != before.end();
      handler_(known ? EventType::modified : EventType::added, object, known ? it->second : nullptr);
    }
  }
}

namespace {

// The bookmark that ends a streaming list's initial events.
bool ends_initial_events(const json::object& bookmark) {
  const json::value* meta = bookmark.if_contains("metadata");
  const json::value* annotations =
      meta != nullptr && meta->is_object() ? meta->get_object().if_contains("annotations") : nullptr;
  const json::value* end = annotations != nullptr && annotations->is_object()
                               ? annotations->get_object().if_contains("k8s.io/initial-events-end")
                               : nullptr;
  return end != nullptr && end->is_string() && end->get_string() == "true";
}

// What a server that does not serve streaming lists answers to one.
bool refuses_streaming(const ApiError& e) {
  return e.kind == ApiError::Kind::status &&
         (e.http_status == 400 || e.http_status == 403 || e.http_status == 405 ||
          e.http_status == 422 || e.http_status == 501);
}

}  // namespace

asio::awaitable<void> Reflector::watch() {
  const bool streaming = relist_;  // run() watches with relist_ set only for a streaming list
  ++counters_.watches;
  if (streaming) {
    ++counters_.lists;
    ++counters_.streaming_lists;
  }
  auto opened = co_await client_->watch(query(true, streaming), options_.transport);
  if (!opened) {
    if (streaming && refuses_streaming(opened.error())) {
      streaming_ = false;  // a plain list next, at once
    } else if (opened.error().is(410)) {
      relist_ = true;
    } else {
      ++counters_.failures;
    }
    co_return;
  }
  std::unique_ptr<WatchConnection> w = std::move(*opened);
  current_ = &w;
  // A streaming list's state, gathered until the bookmark that ends it (copies out of the
  // scratch arena below).
  std::vector<Store::Prepared> initial;
  // Each batch is parsed into a scratch arena, reset once the batch is applied: the store keeps
  // copies of its own, so parsing costs no heap allocation and no node-by-node destruction.
  auto buffer = std::make_unique<unsigned char[]>(kScratchBytes);
  json::monotonic_resource scratch(buffer.get(), kScratchBytes);
  while (!stopped_) {
    scratch.release();
    auto events = co_await w->next(json::storage_ptr(&scratch));
    if (!events) {
      ++counters_.failures;
      break;
    }
    for (auto& e : *events) {
      ++counters_.events;
      std::string rv = e.resource_version();
      if (relist_ && e.type != EventType::error) {
        // Still in a streaming list's initial state.
        if (e.type == EventType::added || e.type == EventType::modified) {
          initial.push_back(store_->prepare(std::move(e.object)));
        } else if (e.type == EventType::bookmark && ends_initial_events(e.object)) {
          streams_cut_short_ = 0;
          apply_list(std::move(initial), std::move(rv));
          initial.clear();
        }
        continue;
      }
      switch (e.type) {
        case EventType::added:
        case EventType::modified: {
          Store::Object stored;
          auto previous = store_->upsert(std::move(e.object), &stored);
          if (handler_) handler_(e.type, stored, previous);
          break;
        }
        case EventType::deleted: {
          auto previous = store_->remove(Store::key_of(e.object));
          if (handler_) {
            // Out of the scratch arena: the handler may keep it.
            handler_(e.type, std::make_shared<const json::object>(e.object, json::storage_ptr()),
                     previous);
          }
          break;
        }
        case EventType::bookmark:
          break;
        case EventType::error: {
          const json::value* code = e.object.if_contains("code");
          if (code != nullptr && code->is_int64() && code->as_int64() == 410) relist_ = true;
          ++counters_.failures;
          current_ = nullptr;
          co_return;
        }
      }
      if (!rv.empty()) set_version(std::move(rv));
    }
    if (w->ended()) break;
  }
  if (streaming && relist_ && !stopped_ && w->ended()) {
    // Ended cleanly before its bookmark: a server that ignores sendInitialEvents never sends one
    // (a broken or malformed stream was counted above and is retried as it was).
    ++counters_.failures;
    if (++streams_cut_short_ >= 2) streaming_ = false;
  }
  current_ = nullptr;
}

asio::awaitable<void> Reflector::run() {
  {
    auto executor = co_await asio::this_coro::executor;
    std::lock_guard lock(current_mutex_);
    executor_ = executor;
  }
  asio::steady_timer timer(executor_);
  auto backoff = options_.initial_backoff;
  auto pause = [&](std::chrono::milliseconds d) -> asio::awaitable<void> {
    // In slices, so that stop() is noticed soon.
    const auto until = std::chrono::steady_clock::now() + d;
    while (!stopped_ && std::chrono::steady_clock::now() < until) {
      timer.expires_after(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  };
  while (!stopped_) {
    const auto failures_before = counters_.failures.load();
    if (relist_ && !streaming_) {
      co_await list();  // a failure is counted: the backoff below
    } else {
      co_await watch();  // a streaming list when relist_ is set
    }
    if (counters_.failures.load() == failures_before) {
      backoff = options_.initial_backoff;
      continue;
    }
    const auto wait = std::chrono::milliseconds(
        static_cast<long>(static_cast<double>(backoff.count()) * (0.5 + jitter())));
    co_await pause(wait);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void Reflector::stop() {
  stopped_ = true;
  std::lock_guard lock(current_mutex_);
  if (!executor_) return;
  asio::post(executor_, [self = shared_from_this()] {
    if (self->current_ != nullptr && *self->current_) (*self->current_)->close();
  });
}

}  // namespace kwatch::client
