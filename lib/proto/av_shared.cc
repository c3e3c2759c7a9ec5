// SPDX-License-Identifier: BSD-3-Clause
#include "proto/av_shared.h"

#include <fcntl.h>
#include <rdma/fi_errno.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "proto/av.h"

namespace dpfab::proto {

namespace {
constexpr uint64_t kMagic = 0x7661'6266'7064'0001ull;  // "dpfbav" and a layout number
constexpr uint32_t kVersion = 2;  // 2: 32-byte addresses (wire/address.h version 3)
constexpr uint32_t kValid = 1;
constexpr uint32_t kRemoved = 2;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared across processes");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared across processes");
}  // namespace

struct SharedAvTable::Header {
  std::atomic<uint64_t> magic;  // kMagic once the table is initialised (release)
  uint32_t version;
  uint32_t reserved;
  uint64_t capacity;
  std::atomic<uint64_t> next;
  std::atomic<uint64_t> valid;
  std::atomic<uint64_t> generation;
};

struct SharedAvTable::Slot {
  std::atomic<uint32_t> state;
  uint32_t reserved;
  AvEntry entry;  // written once, before state becomes kValid
};
static_assert(sizeof(AvEntry) == sizeof(wire::Address));

std::string SharedAvTable::object_name(const std::string& name) {
  std::string o = "/dpfab-av.";
  for (char c : name) o += c == '/' ? '_' : c;
  return o;
}

size_t SharedAvTable::bytes_for(size_t capacity) noexcept {
  return sizeof(Header) + capacity * sizeof(fi_addr_t) + capacity * sizeof(Slot);
}

SharedAvTable::SharedAvTable(UniqueFd fd, void* base, size_t bytes, bool writable,
                             std::string object)
    : fd_(std::move(fd)),
      base_(base),
      bytes_(bytes),
      writable_(writable),
      object_(std::move(object)),
      header_(static_cast<Header*>(base)),
      map_(reinterpret_cast<fi_addr_t*>(static_cast<char*>(base) + sizeof(Header))),
      capacity_(header_->capacity) {}

SharedAvTable::~SharedAvTable() {
  munmap(base_, bytes_);
  if (writable_) shm_unlink(object_.c_str());
}

Result<std::unique_ptr<SharedAvTable>> SharedAvTable::create(const std::string& name,
                                                             size_t capacity) {
  if (name.empty()) return make_error(-FI_EINVAL, "empty AV name");
  if (capacity == 0) capacity = kDefaultCapacity;
  if (capacity > kMaxCapacity)
    return make_error(-FI_EINVAL, "shared AV '" + name + "': count above the bound");
  const std::string object = object_name(name);
  // A new object: one left by a writer that died is replaced (its readers keep their mapping).
  shm_unlink(object.c_str());
  UniqueFd fd(shm_open(object.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return make_error(-errno, "shm_open " + object + ": " + std::strerror(errno));
  const size_t bytes = bytes_for(capacity);
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    shm_unlink(object.c_str());
    return make_error(-e, "ftruncate " + object + ": " + std::strerror(e));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    const int e = errno;
    shm_unlink(object.c_str());
    return make_error(-e, "mmap " + object + ": " + std::strerror(e));
  }
  // The object is zero-filled: every slot is free (state 0). Construct what has non-zero initial
  // values.
  auto* h = new (base) Header{};
  h->version = kVersion;
  h->capacity = capacity;
  auto* map = reinterpret_cast<fi_addr_t*>(static_cast<char*>(base) + sizeof(Header));
  for (size_t i = 0; i < capacity; ++i) map[i] = FI_ADDR_NOTAVAIL;
  auto* slots = reinterpret_cast<Slot*>(map + capacity);
  for (size_t i = 0; i < capacity; ++i) new (&slots[i]) Slot{};
  // Release: pairs with the acquire load of the magic in open(): the header and the map are
  // seen initialised by a reader that sees the magic.
  h->magic.store(kMagic, std::memory_order_release);
  std::unique_ptr<SharedAvTable> t(new (std::nothrow)
                                       SharedAvTable(std::move(fd), base, bytes, true, object));
  if (!t) {
    munmap(base, bytes);
    shm_unlink(object.c_str());
    return make_error(-FI_ENOMEM, "shared AV '" + name + "'");
  }
  return t;
}

Result<std::unique_ptr<SharedAvTable>> SharedAvTable::open(const std::string& name) {
  if (name.empty()) return make_error(-FI_EINVAL, "empty AV name");
  const std::string object = object_name(name);
  UniqueFd fd(shm_open(object.c_str(), O_RDONLY | O_CLOEXEC, 0));
  if (!fd.valid()) {
    const int e = errno;
    if (e == ENOENT) return make_error(-FI_ENOENT, "no shared AV '" + name + "'");
    return make_error(-e, "shm_open " + object + ": " + std::strerror(e));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Header))
    return make_error(-FI_EINVAL, object + " is not a dpfab shared AV");
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return make_error(-errno, "mmap " + object + ": " + std::strerror(errno));
  const auto* h = static_cast<const Header*>(base);
  // Acquire: pairs with the release store in create().
  if (h->magic.load(std::memory_order_acquire) != kMagic || h->version != kVersion ||
      h->capacity == 0 || h->capacity > kMaxCapacity || bytes_for(h->capacity) != bytes) {
    munmap(base, bytes);
    return make_error(-FI_EINVAL, object + " is not a dpfab shared AV of this version");
  }
  std::unique_ptr<SharedAvTable> t(new (std::nothrow)
                                       SharedAvTable(std::move(fd), base, bytes, false, object));
  if (!t) {
    munmap(base, bytes);
    return make_error(-FI_ENOMEM, "shared AV '" + name + "'");
  }
  return t;
}

SharedAvTable::Slot* SharedAvTable::slot(fi_addr_t index) const noexcept {
  return reinterpret_cast<Slot*>(map_ + capacity_) + index;
}

const AvEntry* SharedAvTable::lookup(fi_addr_t a) const noexcept {
  if (a >= capacity_) return nullptr;
  const Slot* s = slot(a);
  // Acquire: pairs with the release store of kValid in publish(): the entry is complete.
  if (s->state.load(std::memory_order_acquire) != kValid) return nullptr;
  return &s->entry;
}

uint64_t SharedAvTable::next() const noexcept {
  // Relaxed: a count; the entries themselves are published through their state.
  return header_->next.load(std::memory_order_relaxed);
}

uint64_t SharedAvTable::valid() const noexcept {
  return header_->valid.load(std::memory_order_relaxed);
}

uint64_t SharedAvTable::generation() const noexcept {
  // Acquire: pairs with the release increments in publish()/remove(): a reader that sees a new
  // generation sees the slot states that changed before it.
  return header_->generation.load(std::memory_order_acquire);
}

void SharedAvTable::set_next(uint64_t next) noexcept {
  header_->next.store(next, std::memory_order_relaxed);
}

void SharedAvTable::publish(fi_addr_t index, const wire::Address& addr) noexcept {
  if (index >= capacity_) return;
  Slot* s = slot(index);
  s->entry.addr = addr;
  // Release: pairs with the acquire load in lookup().
  s->state.store(kValid, std::memory_order_release);
  // Relaxed: map[] is read by applications after their own synchronisation with the writer.
  std::atomic_ref<fi_addr_t>(map_[index]).store(index, std::memory_order_relaxed);
  header_->valid.fetch_add(1, std::memory_order_relaxed);
  header_->generation.fetch_add(1, std::memory_order_release);
}

void SharedAvTable::remove(fi_addr_t index) noexcept {
  if (index >= capacity_) return;
  Slot* s = slot(index);
  // Relaxed: nothing is published with it; a reader that still sees kValid reads the old,
  // unchanged address, as in the writer's own AV.
  s->state.store(kRemoved, std::memory_order_relaxed);
  header_->valid.fetch_sub(1, std::memory_order_relaxed);
  header_->generation.fetch_add(1, std::memory_order_release);
}

}  // namespace dpfab::proto
