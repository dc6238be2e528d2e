// client-go's Store/Indexer: a thread-safe mirror of one resource's objects, keyed
// "namespace/name" (or "name" for cluster-scoped objects), with named indexes (by namespace, by
// a label, by any field: an index function returns the values an object is filed under) and a
// transform applied to every object before it is kept (to drop managedFields, say). Objects are
// immutable once stored and shared with readers: a read never copies an object, and a reader
// holding one is not affected by later changes.
//
// Thread-safety: every member may be called from any thread (a shared mutex inside).
#pragma once

#include <boost/json/object.hpp>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

namespace kwatch::client {

class Store {
 public:
  using Object = std::shared_ptr<const boost::json::object>;
  using IndexFn = std::function<std::vector<std::string>(const boost::json::object&)>;
  using TransformFn = std::function<void(boost::json::object&)>;

  // "namespace/name", or "name" without a namespace.
  static std::string key_of(const boost::json::object& object);
  // An index function filing objects under their namespace.
  static IndexFn by_namespace();
  // An index function filing objects under the value of one label (objects without it: none).
  static IndexFn by_label(std::string label);

  // Before the store is used.
  void add_index(std::string name, IndexFn fn);
  void set_transform(TransformFn fn);

  // The previous object under its key (null if none).
  Object upsert(boost::json::object object);
  Object remove(const std::string& key);
  // Replaces everything (after a list): returns the objects that were there and are not now.
  std::vector<Object> replace(std::vector<boost::json::object> objects);

  Object get(const std::string& key) const;
  std::vector<Object> list() const;
  std::vector<Object> by_index(const std::string& index, const std::string& value) const;
  std::vector<std::string> keys() const;
  std::size_t size() const;

 private:
  Object make(boost::json::object object) const;
  void index_locked(const std::string& key, const Object& object);
  void unindex_locked(const std::string& key, const Object& object);

  mutable std::shared_mutex mutex_;
  std::map<std::string, Object> objects_;
  std::map<std::string, IndexFn> index_fns_;
  // index name -> value -> keys
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
  TransformFn transform_;
};

}  // namespace kwatch::client
