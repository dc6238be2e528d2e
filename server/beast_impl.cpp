// The one translation unit that compiles Beast (BOOST_BEAST_SEPARATE_COMPILATION).
#include <boost/beast/src.hpp>
// Asio's TLS support, compiled once here: kwatch_server links OpenSSL, kwatch_storage does not.
#include <boost/asio/ssl/impl/src.hpp>
