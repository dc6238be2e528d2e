#include "storage/mvcc_store.hpp"

#include <algorithm>
#include <utility>

namespace kwatch::storage {

std::int64_t MvccStore::current_revision() const {
  std::shared_lock lock(state_mutex_);
  return revision_;
}

std::int64_t MvccStore::compacted_revision() const {
  std::shared_lock lock(state_mutex_);
  return compacted_;
}

std::size_t MvccStore::size() const {
  std::shared_lock lock(state_mutex_);
  return live_count_;
}

Result<std::int64_t> MvccStore::resolve_revision(std::int64_t revision) const {
  if (revision == 0) return revision_;
  if (revision < 0 || revision > revision_) return Errc::bad_request;
  if (revision < compacted_) return Errc::gone;
  return revision;
}

const MvccStore::Rev* MvccStore::find_at(const std::vector<Rev>& revs, std::int64_t revision) {
  auto it = std::upper_bound(revs.begin(), revs.end(), revision,
                             [](std::int64_t r, const Rev& rev) { return r < rev.mod_revision; });
  if (it == revs.begin()) return nullptr;
  --it;
  return it->value ? &*it : nullptr;
}

KeyValue MvccStore::to_key_value(std::string_view key, const Rev& rev) {
  KeyValue kv;
  kv.key = std::string(key);
  if (rev.value) kv.value = *rev.value;
  kv.create_revision = rev.create_revision;
  kv.mod_revision = rev.mod_revision;
  kv.version = rev.version;
  return kv;
}

const MvccStore::Rev* MvccStore::live(std::string_view key) const {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.empty() || !it->second.back().value) return nullptr;
  return &it->second.back();
}

Result<KeyValue> MvccStore::get(std::string_view key, std::int64_t revision) const {
  std::shared_lock lock(state_mutex_);
  auto at = resolve_revision(revision);
  if (!at) return at.error();
  auto it = keys_.find(key);
  if (it == keys_.end()) return Errc::not_found;
  const Rev* rev = find_at(it->second, *at);
  if (!rev) return Errc::not_found;
  return to_key_value(key, *rev);
}

Result<ListResult> MvccStore::range(const ListOptions& options) const {
  std::shared_lock lock(state_mutex_);
  auto at = resolve_revision(options.revision);
  if (!at) return at.error();
  ListResult result;
  result.revision = *at;
  const std::string& start = options.start_key.empty() || options.start_key < options.prefix
                                 ? options.prefix
                                 : options.start_key;
  const auto limit = static_cast<std::size_t>(std::max<std::int64_t>(options.limit, 0));
  for (auto it = keys_.lower_bound(start);
       it != keys_.end() && std::string_view(it->first).starts_with(options.prefix); ++it) {
    const Rev* rev = find_at(it->second, *at);
    if (!rev) continue;
    ++result.count;
    if (options.count_only) continue;
    if (limit != 0 && result.kvs.size() >= limit) {
      result.more = true;
      continue;  // keep counting: `count` covers every key from start_key on
    }
    result.kvs.push_back(to_key_value(it->first, *rev));
  }
  return result;
}

Result<EventRead> MvccStore::read_events(std::string_view prefix, std::int64_t start_revision,
                                         std::size_t max_events, std::size_t max_scan) const {
  std::shared_lock lock(state_mutex_);
  if (start_revision == 0) start_revision = revision_ + 1;
  if (start_revision <= compacted_) return Errc::gone;
  EventRead read;
  read.current_revision = revision_;
  // Revisions below log_base_ and above compacted_ carry no write (only revision 1 of a fresh
  // store), so starting at log_base_ loses nothing.
  std::int64_t next = std::max(start_revision, log_base_);
  std::size_t scanned = 0;
  while (next <= revision_ && read.events.size() < max_events && scanned < max_scan) {
    const LogEntry& e = log_[static_cast<std::size_t>(next - log_base_)];
    ++next;
    ++scanned;
    if (!std::string_view(e.key).starts_with(prefix)) continue;
    Event ev;
    if (e.rev.value) {
      ev.type = EventType::put;
      ev.kv = to_key_value(e.key, e.rev);
    } else {
      ev.type = EventType::del;
      ev.kv.key = e.key;
      ev.kv.mod_revision = e.rev.mod_revision;
    }
    if (e.prev.value) ev.prev_kv = to_key_value(e.key, e.prev);
    read.events.push_back(std::move(ev));
  }
  read.next_revision = std::max(next, start_revision);
  return read;
}

StoreState MvccStore::export_state() const {
  std::shared_lock lock(state_mutex_);
  StoreState state;
  state.revision = revision_;
  state.compacted_revision = compacted_;
  state.entries.reserve(live_count_);
  for (const auto& [key, revs] : keys_) {
    if (revs.empty() || !revs.back().value) continue;
    const Rev& r = revs.back();
    state.entries.push_back({key, r.value, r.create_revision, r.mod_revision, r.version});
  }
  return state;
}

Result<TxnResult> MvccStore::put_if(std::string_view key, std::int64_t expected_mod_revision,
                                    std::string value) {
  std::lock_guard writer(writer_mutex_);
  // Only writers change the state and we exclude them all, so reading without state_mutex_ is
  // safe here.
  const Rev* cur = live(key);
  const std::int64_t cur_mod = cur ? cur->mod_revision : 0;
  if (cur_mod != expected_mod_revision) {
    TxnResult failed;
    failed.kv = cur ? to_key_value(key, *cur) : KeyValue{std::string(key), {}, 0, 0, 0, false, {}};
    failed.revision = revision_;
    return failed;
  }
  Mutation m;
  m.kind = Mutation::Kind::put;
  m.revision = revision_ + 1;
  m.create_revision = cur ? cur->create_revision : m.revision;
  m.version = cur ? cur->version + 1 : 1;
  m.key = std::string(key);
  m.value = std::make_shared<const std::string>(std::move(value));
  TxnResult ok;
  ok.succeeded = true;
  ok.kv = KeyValue{m.key, *m.value, m.create_revision, m.revision, m.version, false, {}};
  ok.revision = m.revision;
  if (auto r = commit(std::move(m)); !r) return r.error();
  return ok;
}

Result<TxnResult> MvccStore::delete_if(std::string_view key, std::int64_t expected_mod_revision) {
  std::lock_guard writer(writer_mutex_);
  const Rev* cur = live(key);
  if (!cur || (expected_mod_revision != 0 && cur->mod_revision != expected_mod_revision)) {
    TxnResult failed;
    failed.kv = cur ? to_key_value(key, *cur) : KeyValue{std::string(key), {}, 0, 0, 0, false, {}};
    failed.revision = revision_;
    return failed;
  }
  TxnResult ok;
  ok.succeeded = true;
  ok.kv = to_key_value(key, *cur);
  Mutation m;
  m.kind = Mutation::Kind::del;
  m.revision = revision_ + 1;
  m.key = std::string(key);
  ok.revision = m.revision;
  if (auto r = commit(std::move(m)); !r) return r.error();
  return ok;
}

Result<void> MvccStore::compact(std::int64_t revision) {
  std::lock_guard writer(writer_mutex_);
  if (revision > revision_ || revision <= 0) return Errc::bad_request;
  if (revision <= compacted_) return Errc::gone;
  Mutation m;
  m.kind = Mutation::Kind::compact;
  m.revision = revision;
  return commit(std::move(m));
}

Result<void> MvccStore::commit(Mutation mutation) {
  if (hook_) {
    if (auto r = hook_(mutation); !r) return r.error();
  }
  {
    std::unique_lock lock(state_mutex_);
    apply_locked(mutation);
  }
  for (auto& [id, listener] : listeners_) listener(mutation);
  return {};
}

void MvccStore::apply_locked(const Mutation& m) {
  switch (m.kind) {
    case Mutation::Kind::put: {
      auto& revs = keys_[m.key];
      LogEntry entry;
      entry.key = m.key;
      if (!revs.empty()) entry.prev = revs.back();
      if (!entry.prev.value) ++live_count_;
      revs.push_back({m.revision, m.create_revision, m.version, m.value});
      entry.rev = revs.back();
      log_.push_back(std::move(entry));
      revision_ = m.revision;
      break;
    }
    case Mutation::Kind::del: {
      auto& revs = keys_[m.key];
      LogEntry entry;
      entry.key = m.key;
      if (!revs.empty()) entry.prev = revs.back();
      if (entry.prev.value) --live_count_;
      revs.push_back({m.revision, 0, 0, nullptr});
      entry.rev = revs.back();
      log_.push_back(std::move(entry));
      revision_ = m.revision;
      break;
    }
    case Mutation::Kind::compact:
      compact_locked(m.revision);
      break;
  }
}

void MvccStore::compact_locked(std::int64_t revision) {
  for (auto it = keys_.begin(); it != keys_.end();) {
    auto& revs = it->second;
    // Keep the newest revision at or below `revision` (the state readable at `revision`) unless
    // it is a tombstone; drop everything older.
    auto keep =
        std::upper_bound(revs.begin(), revs.end(), revision,
                         [](std::int64_t r, const Rev& rev) { return r < rev.mod_revision; });
    if (keep != revs.begin()) {
      auto newest_old = std::prev(keep);
      revs.erase(revs.begin(), newest_old->value ? newest_old : keep);
    }
    if (revs.empty()) {
      it = keys_.erase(it);
    } else {
      ++it;
    }
  }
  while (!log_.empty() && log_base_ <= revision) {
    log_.pop_front();
    ++log_base_;
  }
  log_base_ = std::max(log_base_, revision + 1);
  compacted_ = revision;
}

void MvccStore::restore(StoreState state) {
  std::lock_guard writer(writer_mutex_);
  std::unique_lock lock(state_mutex_);
  keys_.clear();
  log_.clear();
  live_count_ = 0;
  for (auto& e : state.entries) {
    keys_[std::move(e.key)].push_back(
        {e.mod_revision, e.create_revision, e.version, std::move(e.value)});
    ++live_count_;
  }
  revision_ = state.revision;
  // Only the state at state.revision is known: older history is gone.
  compacted_ = std::max(state.compacted_revision, state.revision);
  log_base_ = state.revision + 1;
}

Result<void> MvccStore::apply(const Mutation& m) {
  std::lock_guard writer(writer_mutex_);
  switch (m.kind) {
    case Mutation::Kind::put:
    case Mutation::Kind::del: {
      if (m.revision <= revision_) return {};  // already in the restored snapshot
      if (m.revision != revision_ + 1) return Errc::corrupt;
      const Rev* cur = live(m.key);
      if (m.kind == Mutation::Kind::del) {
        if (!cur) return Errc::corrupt;
      } else {
        const std::int64_t create = cur ? cur->create_revision : m.revision;
        const std::int64_t version = cur ? cur->version + 1 : 1;
        if (!m.value || m.create_revision != create || m.version != version) {
          return Errc::corrupt;
        }
      }
      break;
    }
    case Mutation::Kind::compact:
      if (m.revision <= compacted_) return {};
      if (m.revision > revision_) return Errc::corrupt;
      break;
    default:
      return Errc::corrupt;
  }
  std::unique_lock lock(state_mutex_);
  apply_locked(m);
  return {};
}

void MvccStore::set_commit_hook(CommitHook hook) {
  std::lock_guard writer(writer_mutex_);
  hook_ = std::move(hook);
}

std::uint64_t MvccStore::add_commit_listener(CommitListener listener) {
  std::lock_guard writer(writer_mutex_);
  const std::uint64_t id = next_listener_id_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

void MvccStore::remove_commit_listener(std::uint64_t id) {
  std::lock_guard writer(writer_mutex_);
  std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
}

}  // namespace kwatch::storage
