#include "storage/storage.hpp"

namespace kwatch::storage {

namespace asio = boost::asio;

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    const auto c = static_cast<unsigned char>(end.back());
    if (c < 0xff) {
      end.back() = static_cast<char>(c + 1);
      return end;
    }
    end.pop_back();
  }
  return end;
}

asio::awaitable<Result<KeyValue>> Storage::create(std::string key, std::string value) {
  auto r = co_await put_if(std::move(key), 0, std::move(value));
  if (!r) co_return r.error();
  if (!r->succeeded) co_return Errc::already_exists;
  co_return std::move(r->kv);
}

asio::awaitable<Result<KeyValue>> Storage::guaranteed_update(std::string key,
                                                             UpdateFn try_update,
                                                             std::optional<KeyValue> suggested) {
  AsyncUpdateFn waiting = [&try_update](const KeyValue* current) -> asio::awaitable<UpdateResult> {
    co_return try_update(current);
  };
  co_return co_await guaranteed_update(std::move(key), std::move(waiting), std::move(suggested));
}

asio::awaitable<Result<KeyValue>> Storage::guaranteed_update(std::string key,
                                                             AsyncUpdateFn try_update,
                                                             std::optional<KeyValue> suggested) {
  std::optional<KeyValue> state = std::move(suggested);
  bool authoritative = false;  // `state` came from storage (a read or a failed guard)
  bool read = !state;
  for (;;) {
    if (read) {
      auto current = co_await get(key);
      if (current) {
        state = std::move(*current);
      } else if (current.error() == Errc::not_found) {
        state.reset();
      } else {
        co_return current.error();
      }
      authoritative = true;
      read = false;
    }
    auto next = co_await try_update(state ? &*state : nullptr);
    const bool same = next && state && (!*next || **next == state->value);
    // Stale bytes (an old encryption key) are rewritten even when the value is unchanged.
    const bool unchanged = same && !state->stale;
    if (!authoritative && (!next || same)) {
      read = true;  // rejections and no-ops are only final on the current state
      continue;
    }
    if (!next) co_return next.error();
    if (unchanged) co_return std::move(*state);
    if (!*next && !state) co_return Errc::not_found;  // nothing to leave as it is
    std::string value = *next ? std::move(**next) : state->value;
    auto r = co_await put_if(key, state ? state->mod_revision : 0, std::move(value));
    if (!r) co_return r.error();
    if (r->succeeded) co_return std::move(r->kv);
    // Lost the race (or the suggestion was stale): retry against the state the guard returned.
    authoritative = true;
    if (r->kv.mod_revision == 0) {
      state.reset();
    } else {
      state = std::move(r->kv);
    }
  }
}

asio::awaitable<Result<std::int64_t>> Storage::count(std::string prefix) {
  ListOptions options;
  options.prefix = std::move(prefix);
  options.count_only = true;
  auto r = co_await list(std::move(options));
  if (!r) co_return r.error();
  co_return r->count;
}

}  // namespace kwatch::storage
