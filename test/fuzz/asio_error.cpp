// storage/storage.hpp includes <boost/asio/awaitable.hpp>, whose error categories are compiled
// separately (BOOST_ASIO_SEPARATE_COMPILATION); the fuzzers build none of storage's Asio code,
// so only these definitions are compiled here.
#include <boost/asio/impl/error.ipp>
