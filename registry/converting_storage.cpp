#include "registry/converting_storage.hpp"

#include "kinds/version_converter.hpp"

#include "apimachinery/stored_json.hpp"

#include <spdlog/spdlog.h>

#include <boost/json/serialize.hpp>

#include <algorithm>

namespace kwatch::registry {

namespace asio = boost::asio;
namespace json = boost::json;
using base::Errc;
using base::Result;
using storage::KeyValue;

namespace {

class ConvertingStream final : public storage::WatchStream {
 public:
  ConvertingStream(std::shared_ptr<ConvertingStorage> view,
                   std::unique_ptr<storage::WatchStream> inner)
      : view_(std::move(view)), inner_(std::move(inner)) {}

  asio::awaitable<Result<storage::WatchBatch>> next() override {
    auto batch = co_await inner_->next();
    if (!batch) co_return batch;
    std::vector<KeyValue*> puts;
    for (auto& event : batch->events) {
      if (event.type == storage::EventType::put) puts.push_back(&event.kv);
      event.prev_kv.reset();  // a state in the other version: the cache keeps its own
    }
    if (!puts.empty()) {
      auto converted = co_await view_->convert(std::move(puts), /*as_list=*/false);
      // Not `unavailable`: resuming would meet the same event again. The cache re-lists, as
      // kube's reflector does after an event it cannot decode, and the list holds only what
      // is there now.
      if (!converted) co_return Errc::internal;
    }
    co_return batch;
  }
  void request_progress() override { inner_->request_progress(); }
  bool progress_is_ordered() const override { return inner_->progress_is_ordered(); }

 private:
  std::shared_ptr<ConvertingStorage> view_;
  std::unique_ptr<storage::WatchStream> inner_;
};

}  // namespace

ConvertingStorage::ConvertingStorage(std::shared_ptr<storage::Storage> inner,
                                     std::string api_version,
                                     std::shared_ptr<const kinds::VersionConverter> converter)
    : inner_(std::move(inner)), api_version_(std::move(api_version)),
      converter_(std::move(converter)) {}

void ConvertingStorage::set_converter(std::shared_ptr<const kinds::VersionConverter> converter) {
  std::lock_guard lock(mutex_);
  converter_ = std::move(converter);
}

std::shared_ptr<const kinds::VersionConverter> ConvertingStorage::converter() const {
  std::lock_guard lock(mutex_);
  return converter_;
}

std::uint64_t ConvertingStorage::converted_objects() const { return converted_.load(); }

asio::awaitable<Result<void>> ConvertingStorage::convert(std::vector<KeyValue*> kvs,
                                                         bool as_list) {
  // A large list goes in reviews of kMaxReviewObjects, as kube's reflector lists in pages: one
  // review (and one answer) stays bounded whatever the number of objects.
  if (kvs.size() > kMaxReviewObjects) {
    for (std::size_t at = 0; at < kvs.size(); at += kMaxReviewObjects) {
      std::vector<KeyValue*> part(
          kvs.begin() + static_cast<std::ptrdiff_t>(at),
          kvs.begin() + static_cast<std::ptrdiff_t>(std::min(kvs.size(), at + kMaxReviewObjects)));
      auto done = co_await convert(std::move(part), as_list);
      if (!done) co_return done;
    }
    co_return Result<void>();
  }
  std::vector<json::object> objects;
  std::vector<KeyValue*> sent;
  for (KeyValue* kv : kvs) {
    if (!kv->read_error.empty() || kv->value.empty()) continue;
    auto parsed = apimachinery::parse_json(kv->value);
    if (!parsed || !parsed->is_object()) continue;  // the cache reports what it cannot decode
    objects.push_back(std::move(parsed->get_object()));
    sent.push_back(kv);
  }
  if (objects.empty()) co_return Result<void>();
  auto converter = this->converter();
  if (!converter) co_return Errc::unavailable;
  converted_ += objects.size();
  auto converted = co_await converter->convert(std::move(objects), api_version_, as_list);
  if (!converted) {
    spdlog::warn("watch cache of {}: {}", api_version_, converted.error().message);
    co_return Errc::unavailable;
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    sent[i]->value = json::serialize((*converted)[i]);
  }
  co_return Result<void>();
}

asio::awaitable<Result<KeyValue>> ConvertingStorage::get(std::string key, std::int64_t revision) {
  auto kv = co_await inner_->get(std::move(key), revision);
  if (!kv) co_return kv;
  std::vector<KeyValue*> one{&*kv};  // named: GCC 12 and braced arguments of a co_await
  auto converted = co_await convert(std::move(one), /*as_list=*/false);
  if (!converted) co_return converted.error();
  co_return kv;
}

asio::awaitable<Result<storage::ListResult>> ConvertingStorage::list(
    storage::ListOptions options) {
  auto listed = co_await inner_->list(std::move(options));
  if (!listed) co_return listed;
  std::vector<KeyValue*> kvs;
  for (auto& kv : listed->kvs) kvs.push_back(&kv);
  auto converted = co_await convert(std::move(kvs), /*as_list=*/true);
  if (!converted) co_return converted.error();
  co_return listed;
}

asio::awaitable<Result<storage::TxnResult>> ConvertingStorage::put_if(std::string, std::int64_t,
                                                                      std::string) {
  co_return Errc::bad_request;
}

asio::awaitable<Result<storage::TxnResult>> ConvertingStorage::delete_if(std::string,
                                                                         std::int64_t) {
  co_return Errc::bad_request;
}

asio::awaitable<Result<std::int64_t>> ConvertingStorage::current_revision() {
  co_return co_await inner_->current_revision();
}

asio::awaitable<Result<void>> ConvertingStorage::compact(std::int64_t) {
  co_return Errc::bad_request;
}

asio::awaitable<Result<std::unique_ptr<storage::WatchStream>>> ConvertingStorage::watch(
    std::string prefix, std::int64_t start_revision, storage::PrevKv prev_kv) {
  auto inner = co_await inner_->watch(std::move(prefix), start_revision, prev_kv);
  if (!inner) co_return inner.error();
  co_return std::unique_ptr<storage::WatchStream>(
      std::make_unique<ConvertingStream>(shared_from_this(), std::move(*inner)));
}

}  // namespace kwatch::registry
