// The one translation unit that compiles Asio, Asio's TLS support and Beast
// (BOOST_ASIO_SEPARATE_COMPILATION, BOOST_BEAST_SEPARATE_COMPILATION come from kwatch_options):
// the kwatch_asio library, linked by every program.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
