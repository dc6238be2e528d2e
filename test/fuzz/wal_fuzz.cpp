// Fuzzes WAL recovery (Wal::open) on one segment file. Input: a mode byte, then the segment
// body, which is written after the 8-byte segment magic to `wal-0000000000000001.log` in a fresh
// directory. Mode bit 0 set: the harness rewrites the CRC of every record it can frame (length
// field in range), so mutations reach record decoding and replay instead of stopping at the
// checksum. Properties: no crash or sanitizer report; open returns a Wal or an error; `corrupt`
// leaves the directory as it was; after a successful open (which may cut a torn tail), opening
// the directory again succeeds and recovers the same state.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "storage/mvcc_store.hpp"
#include "storage/wal.hpp"
#include "test/fuzz/fuzz_support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kwatch::storage;

constexpr std::string_view kLogMagic{"KWWAL\0\0\1", 8};

fs::path scratch_dir() {
  // tmpfs when there is one: recovery fsyncs, and the disk is shared.
  fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  return base / ("kwatch-wal-fuzz-" + std::to_string(::getpid()));
}

std::uint32_t get_u32(const std::string& s, std::size_t pos) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(static_cast<unsigned char>(s[pos + i])) << (8 * i);
  return v;
}

void put_u32(std::string& s, std::size_t pos, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s[pos + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

void fix_crcs(std::string& file) {
  std::size_t pos = kLogMagic.size();
  while (file.size() - pos >= 8) {
    const std::uint32_t len = get_u32(file, pos);
    if (len > file.size() - pos - 8) return;
    boost::crc_32_type crc;
    crc.process_bytes(file.data() + pos + 8, len);
    put_u32(file, pos + 4, crc.checksum());
    pos += 8 + len;
  }
}

bool same_state(const StoreState& a, const StoreState& b) {
  if (a.revision != b.revision || a.compacted_revision != b.compacted_revision ||
      a.entries.size() != b.entries.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.entries.size(); ++i) {
    const auto& x = a.entries[i];
    const auto& y = b.entries[i];
    if (x.key != y.key || *x.value != *y.value || x.create_revision != y.create_revision ||
        x.mod_revision != y.mod_revision || x.version != y.version) {
      return false;
    }
  }
  return true;
}

// The directory holds just the segment we wrote, with its bytes.
bool unchanged(const fs::path& dir, const std::string& file) {
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  std::ifstream in(dir / "wal-0000000000000001.log", std::ios::binary);
  const std::string now{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return entries == 1 && now == file;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(scratch_dir(), ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool fix = data[0] & 1;
  std::string file(kLogMagic);
  file.append(reinterpret_cast<const char*>(data + 1), size - 1);
  if (fix) fix_crcs(file);

  static const fs::path dir = scratch_dir();
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "wal-0000000000000001.log", std::ios::binary);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
    if (!out) kwatch::fuzz::fail("cannot write the segment");
  }

  WalOptions options{.dir = dir, .sync = false};
  StoreState first;
  {
    MvccStore store;
    auto wal = Wal::open(options, store);
    if (!wal) {
      // "corrupt: the directory is not opened nor changed" (wal.hpp).
      if (wal.error() == Errc::corrupt && !unchanged(dir, file)) {
        kwatch::fuzz::fail("a corrupt directory was changed");
      }
      return 0;
    }
    first = store.export_state();
  }
  MvccStore store;
  auto wal = Wal::open(options, store);
  if (!wal) kwatch::fuzz::fail("a recovered directory does not open again", wal.error().message());
  if (!same_state(first, store.export_state())) {
    kwatch::fuzz::fail("a recovered directory recovers a different state the second time");
  }
  return 0;
}
