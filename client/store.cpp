#include "client/store.hpp"

#include "apimachinery/json_path.hpp"
#include "client/object_meta.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <memory>
#include <mutex>

namespace kwatch::client {

namespace json = boost::json;

namespace {

using apimachinery::string_at;

const json::object* metadata_of(const json::object& object) {
  const json::value* m = object.if_contains("metadata");
  return m != nullptr ? m->if_object() : nullptr;
}

// Counts what a copy of an object allocates, so that the copy kept can be made in one block of
// exactly that size. The measuring copy itself is bumped into a scratch buffer of this thread's,
// reused by the next measure, and never destroyed node by node.
class CountingResource final : public json::memory_resource {
 public:
  std::size_t bytes = 0;

  ~CountingResource() override {
    for (void* p : spilled_) ::operator delete(p, std::align_val_t(alignof(std::max_align_t)));
  }

 private:
  static constexpr std::size_t kScratch = 64 * 1024;

  void* do_allocate(std::size_t n, std::size_t align) override {
    bytes = (bytes + align - 1) / align * align + n;
    thread_local std::unique_ptr<char[]> scratch(new char[kScratch]);
    const std::size_t at = (used_ + align - 1) / align * align;
    if (align <= alignof(std::max_align_t) && at + n <= kScratch) {
      used_ = at + n;
      return scratch.get() + at;
    }
    void* p = ::operator new(n, std::align_val_t(alignof(std::max_align_t)));
    spilled_.push_back(p);
    return p;
  }
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const json::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::size_t used_ = 0;
  std::vector<void*> spilled_;
};

// One block for one stored object's whole tree: no per-node heap headers, no rounding to size
// classes, and nothing to free node by node. What a copy did not foresee (it never happens: the
// copy is made from the object just measured) comes from the heap.
class ObjectArena final : public json::memory_resource {
 public:
  explicit ObjectArena(std::size_t size)
      : block_(static_cast<char*>(::operator new(size, std::align_val_t(alignof(std::max_align_t))))),
        size_(size) {}
  ~ObjectArena() override {
    ::operator delete(block_, std::align_val_t(alignof(std::max_align_t)));
    for (auto& [p, align] : extra_) ::operator delete(p, std::align_val_t(align));
  }
  ObjectArena(const ObjectArena&) = delete;
  ObjectArena& operator=(const ObjectArena&) = delete;

 private:
  void* do_allocate(std::size_t n, std::size_t align) override {
    const std::size_t at = (used_ + align - 1) / align * align;
    if (at + n <= size_) {
      used_ = at + n;
      return block_ + at;
    }
    void* p = ::operator new(n, std::align_val_t(align));
    extra_.emplace_back(p, align);
    return p;
  }
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const json::memory_resource& other) const noexcept override {
    return this == &other;
  }

  char* block_;
  std::size_t size_;
  std::size_t used_ = 0;
  std::vector<std::pair<void*, std::size_t>> extra_;
};

// A stored object and the arena its tree lives in. The tree refers to the arena without
// counting references (a counted storage costs an atomic operation per node copied and a walk
// of the whole tree to destroy it); the holder keeps the arena alive instead, and readers hold
// the holder through the object (an aliasing shared_ptr).
struct ArenaObject {
  ArenaObject(std::size_t bytes, const json::object& from)
      : arena(bytes), object(from, json::storage_ptr(&arena)) {}
  ObjectArena arena;  // destroyed after the object
  json::object object;
};

}  // namespace
}  // namespace kwatch::client

// Nodes in these need no destructor run: the memory goes with the resource.
template <>
struct boost::json::is_deallocate_trivial<kwatch::client::ObjectArena> : std::true_type {};
template <>
struct boost::json::is_deallocate_trivial<kwatch::client::CountingResource> : std::true_type {};

namespace kwatch::client {

std::string Store::key_of(const json::object& object) {
  const std::string ns = metadata_string(object, "namespace");
  const std::string name = metadata_string(object, "name");
  return ns.empty() ? name : ns + "/" + name;
}

Store::IndexFn Store::by_namespace() {
  return [](const json::object& o) -> std::vector<std::string> {
    std::string ns = metadata_string(o, "namespace");
    if (ns.empty()) return {};
    return {std::move(ns)};
  };
}

Store::IndexFn Store::by_label(std::string label) {
  return [label = std::move(label)](const json::object& o) -> std::vector<std::string> {
    const json::object* meta = metadata_of(o);
    const json::value* labels = meta != nullptr ? meta->if_contains("labels") : nullptr;
    if (labels == nullptr || !labels->is_object()) return {};
    std::string value = string_at(&labels->get_object(), label);
    if (value.empty() && !labels->get_object().contains(label)) return {};
    return {std::move(value)};
  };
}

void Store::add_index(std::string name, IndexFn fn) {
  std::unique_lock lock(mutex_);
  index_fns_[name] = std::move(fn);
  auto& index = indexes_[name];
  index.clear();
  for (const auto& [key, entry] : objects_) {
    for (auto& value : index_fns_[name](*read(entry))) index[value].insert(key);
  }
}

void Store::set_transform(TransformFn fn) {
  std::unique_lock lock(mutex_);
  transform_ = std::move(fn);
}

Store::Entry Store::make(json::object object, Object* parsed) const {
  if (transform_) transform_(object);
  Entry entry;
  if (representation_ == Representation::compact) {
    entry.text = json::serialize(object);
    entry.text.shrink_to_fit();
    if (parsed != nullptr) {
      // A caller's scratch storage does not outlive the call: the object handed back must not
      // live there.
      *parsed = object.storage().get() == json::storage_ptr().get()
                    ? std::make_shared<const json::object>(std::move(object))
                    : std::make_shared<const json::object>(object, json::storage_ptr());
    }
    return entry;
  }
  // Measured by a first copy, kept as a second in one block of that size: a parsed object's
  // nodes are spread over many small heap blocks, each with its header and size-class slack.
  std::size_t bytes = 0;
  {
    CountingResource counter;
    json::object measured(object, json::storage_ptr(&counter));
    bytes = counter.bytes;
  }
  auto holder = std::make_shared<const ArenaObject>(bytes, object);
  entry.object = Object(holder, &holder->object);
  if (parsed != nullptr) *parsed = entry.object;
  return entry;
}

Store::Object Store::read(const Entry& entry) const {
  if (entry.object) return entry.object;
  // Written by serialize: it parses.
  return std::make_shared<const json::object>(json::parse(entry.text).as_object());
}

void Store::index_locked(const std::string& key, const json::object& object) {
  for (const auto& [name, fn] : index_fns_) {
    for (auto& value : fn(object)) indexes_[name][value].insert(key);
  }
}

void Store::unindex_locked(const std::string& key, const json::object& object) {
  for (const auto& [name, fn] : index_fns_) {
    auto& index = indexes_[name];
    for (auto& value : fn(object)) {
      auto it = index.find(value);
      if (it == index.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) index.erase(it);
    }
  }
}

Store::Object Store::upsert(json::object object, Object* stored) {
  std::string key = key_of(object);
  Object parsed;
  Entry entry = make(std::move(object), &parsed);
  if (stored != nullptr) *stored = parsed;
  std::unique_lock lock(mutex_);
  Object previous;
  auto it = objects_.find(key);
  if (it != objects_.end()) {
    previous = read(it->second);
    unindex_locked(key, *previous);
    it->second = std::move(entry);
  } else {
    objects_.emplace(key, std::move(entry));
  }
  index_locked(key, *parsed);
  return previous;
}

Store::Object Store::remove(const std::string& key) {
  std::unique_lock lock(mutex_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  Object previous = read(it->second);
  unindex_locked(key, *previous);
  objects_.erase(it);
  return previous;
}

Store::Prepared::Prepared() = default;
Store::Prepared::Prepared(Prepared&&) noexcept = default;
Store::Prepared& Store::Prepared::operator=(Prepared&&) noexcept = default;
Store::Prepared::~Prepared() = default;

Store::Prepared Store::prepare(json::object object) const {
  Prepared p;
  p.key_ = key_of(object);
  bool indexed = false;
  {
    std::shared_lock lock(mutex_);
    indexed = !index_fns_.empty();
  }
  // The object as kept only when indexes need it: in the compact form that is a copy out of the
  // caller's storage, per listed object.
  Object parsed;
  p.entry_ = std::make_unique<Entry>(make(std::move(object), indexed ? &parsed : nullptr));
  if (!indexed) return p;
  std::shared_lock lock(mutex_);
  for (const auto& [name, fn] : index_fns_) p.index_values_.emplace_back(name, fn(*parsed));
  return p;
}

void Store::index_values_locked(
    const std::string& key, const std::vector<std::pair<std::string, std::vector<std::string>>>& values) {
  for (const auto& [name, list] : values) {
    auto& index = indexes_[name];
    for (const auto& value : list) index[value].insert(key);
  }
}

std::vector<Store::Object> Store::replace(std::vector<json::object> objects) {
  std::vector<Prepared> prepared;
  prepared.reserve(objects.size());
  for (auto& o : objects) prepared.push_back(prepare(std::move(o)));
  objects.clear();
  return replace(std::move(prepared));
}

std::vector<Store::Object> Store::replace(std::vector<Prepared> objects) {
  std::map<std::string, Entry> fresh;
  for (auto& p : objects) fresh.insert_or_assign(p.key_, std::move(*p.entry_));
  std::unique_lock lock(mutex_);
  std::vector<Object> gone;
  for (const auto& [key, entry] : objects_) {
    if (!fresh.count(key)) gone.push_back(read(entry));
  }
  objects_ = std::move(fresh);
  for (auto& [name, index] : indexes_) index.clear();
  for (const auto& p : objects) index_values_locked(p.key_, p.index_values_);
  return gone;
}

Store::Object Store::get(const std::string& key) const {
  std::shared_lock lock(mutex_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : read(it->second);
}

std::vector<Store::Object> Store::list() const {
  std::shared_lock lock(mutex_);
  std::vector<Object> out;
  out.reserve(objects_.size());
  for (const auto& [key, entry] : objects_) out.push_back(read(entry));
  return out;
}

std::vector<Store::Object> Store::list(const apimachinery::LabelSelector& selector) const {
  std::shared_lock lock(mutex_);
  std::vector<Object> out;
  for (const auto& [key, entry] : objects_) {
    Object o = read(entry);
    const json::object* meta = apimachinery::object_member(*o, "metadata");
    const json::object* labels =
        meta != nullptr ? apimachinery::object_member(*meta, "labels") : nullptr;
    if (selector.matches(labels)) out.push_back(std::move(o));
  }
  return out;
}

std::vector<Store::Object> Store::by_index(const std::string& index, const std::string& value) const {
  std::shared_lock lock(mutex_);
  std::vector<Object> out;
  auto i = indexes_.find(index);
  if (i == indexes_.end()) return out;
  auto v = i->second.find(value);
  if (v == i->second.end()) return out;
  for (const auto& key : v->second) {
    if (auto it = objects_.find(key); it != objects_.end()) out.push_back(read(it->second));
  }
  return out;
}

std::vector<std::string> Store::keys() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, entry] : objects_) out.push_back(key);
  return out;
}

std::size_t Store::size() const {
  std::shared_lock lock(mutex_);
  return objects_.size();
}

}  // namespace kwatch::client
