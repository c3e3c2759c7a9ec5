// SPDX-License-Identifier: BSD-3-Clause
//
// Ring: one direction of a same-host link, a single-producer single-consumer ring of
// variable-length records in memory shared by two processes (segment.h maps it).
//
// Layout of a ring's area (both processes map it; offsets from its start):
//      0  RingControl: the producer's `head` (bytes ever written) on one cache line, the
//         consumer's `tail` (bytes ever consumed) on the next (DPDK rte_ring_core.h keeps its
//         producer and consumer fields apart the same way)
//   4096  data: `size` bytes, a power of two; a record starts at a multiple of kAlign and never
//         wraps: one that does not fit before the end is preceded by a pad record to the end
//
// A record: a 16-byte RecordHeader (the payload length, a kind, and the endpoints it goes
// between, see below) and the payload, padded to kAlign.
//
// Memory order. The producer writes the record, then stores head (release); the consumer loads
// head (acquire) before it reads the record: a synchronizing edge, so the record's bytes are
// visible. The consumer stores tail (release) once it is done with the records before it; the
// producer loads tail (acquire) before it reuses their bytes: the consumer's reads happen before
// the producer's overwrite. Each side keeps a private copy of the other's index and reloads it only
// when the ring looks full (producer) or empty (consumer): the steady state touches the other
// side's cache line once per batch, not per record.
//
// Trust. The other process may be broken or hostile (a process of the same user: nothing else can
// map the segment). The consumer trusts nothing it reads from the ring: the head must stay within
// `size` bytes ahead of the tail, every record header is copied out once and checked (kind known,
// length within the data area and within what the head says was written, alignment), and a
// record that fails is reported as Status::kCorrupt: the link is then given up (node.h), never
// read further. The payload is read in place by the caller, which copies what it keeps and
// validates it (the RDM and frame decoders); a producer that rewrites bytes while they are being
// copied changes only data it sent itself. test/fuzz/shm_ring_fuzz.cc feeds the reader arbitrary
// ring contents.
//
// Threads: one producer thread at a time (the caller serialises: node.h holds a lock), one
// consumer at a time (the engine's receive side). Nothing here makes a syscall.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dpfab::shm {

inline constexpr size_t kRingControlBytes = 4096;
inline constexpr size_t kAlign = 64;
inline constexpr size_t kRecordHeaderBytes = 16;

/// What a record carries.
enum class RecordKind : uint8_t {
  kPad = 1,    ///< filler to the end of the data area: skipped
  kFrame = 2,  ///< a whole Ethernet frame as a port would carry it (DGRAM, connection management)
  kRdm = 3,    ///< an RDM packet: the RDM header (wire/rdm.h) and its data, between two endpoints
  /// An RDM packet whose data stays in the sender's memory: the RDM header, then the address and
  /// length of the data there (RdmIndirect); the receiver copies it with process_vm_readv.
  kRdmIndirect = 4,
};
inline constexpr uint8_t kRecordKindMax = 4;

/// The 16-byte header of a record (host byte order: both ends run on this host).
struct RecordHeader {
  uint32_t len;          ///< payload bytes after the header
  RecordKind kind;       ///< RecordKind
  uint8_t flags;         ///< 0 (reserved)
  uint16_t src_ep;       ///< kRdm*: the sending endpoint's id
  uint16_t src_port_be;  ///< kRdm*: the sending endpoint's UDP port (network order)
  uint16_t dst_port_be;  ///< kRdm*: the receiving endpoint's UDP port (network order)
  uint16_t dst_ep;       ///< kRdm*: the receiving endpoint's id
  uint16_t reserved;     ///< 0
};
static_assert(sizeof(RecordHeader) == kRecordHeaderBytes);

/// The payload tail of a kRdmIndirect record: where the data is in the sender's memory.
struct RdmIndirect {
  uint64_t addr;
  uint64_t len;
};

struct RingControl {
  alignas(64) std::atomic<uint64_t> head;  ///< written by the producer
  alignas(64) std::atomic<uint64_t> tail;  ///< written by the consumer
  /// Written by the consumer once: its node's poll-list slot of this ring + 1 (0: not yet), the
  /// bit a producer sets in the consumer's NodePage::ready (node.h). Read by the producer until
  /// it is known. Its own line: the producer does not pull the tail's in.
  alignas(64) std::atomic<uint32_t> reader_slot;
};
static_assert(sizeof(RingControl) <= kRingControlBytes);

/// Bytes a record with `payload` bytes takes in the ring.
constexpr uint64_t record_bytes(uint64_t payload) noexcept {
  return (kRecordHeaderBytes + payload + kAlign - 1) & ~uint64_t{kAlign - 1};
}

/// Whether `size` is a data-area size rings accept: a power of two from 4 KiB to 64 MiB.
constexpr bool valid_ring_size(uint64_t size) noexcept {
  return size >= 4096 && size <= (uint64_t{64} << 20) && (size & (size - 1)) == 0;
}

/// The producer's side. Owner: one thread at a time (the caller's lock).
class RingWriter {
 public:
  RingWriter() noexcept = default;
  /// `area` is the ring's mapped area (kRingControlBytes + size bytes), `size` valid_ring_size.
  /// The producer's position starts at the head found there (a new ring: 0).
  RingWriter(void* area, uint64_t size) noexcept
      : ctl_(static_cast<RingControl*>(area)),
        data_(static_cast<uint8_t*>(area) + kRingControlBytes),
        size_(size),
        head_(ctl_->head.load(std::memory_order_relaxed)),
        tail_(ctl_->tail.load(std::memory_order_acquire)) {}

  bool valid() const noexcept { return ctl_ != nullptr; }
  /// The consumer's slot + 1 (RingControl::reader_slot), 0 while it has not said.
  uint32_t reader_slot() const noexcept {
    return ctl_->reader_slot.load(std::memory_order_seq_cst);
  }
  /// The largest payload one record may have.
  uint64_t max_payload() const noexcept { return size_ / 4 - kRecordHeaderBytes; }

  /// Room for a record of `payload` bytes (<= max_payload()): a pointer to its header, to be
  /// filled and then published with commit(). nullptr when the ring is full (the consumer is
  /// behind): nothing changed, try later.
  RecordHeader* reserve(uint64_t payload) noexcept {
    const uint64_t need = record_bytes(payload);
    const uint64_t off = head_ & (size_ - 1);
    const uint64_t pad = off + need > size_ ? size_ - off : 0;
    if (head_ + pad + need - tail_ > size_) {
      // Acquire: pairs with the consumer's release store of tail; its reads of the records
      // before it happened before our writes into their bytes.
      tail_ = ctl_->tail.load(std::memory_order_acquire);
      if (head_ + pad + need - tail_ > size_) return nullptr;
    }
    if (pad) {
      auto* h = reinterpret_cast<RecordHeader*>(data_ + off);
      *h = RecordHeader{
          static_cast<uint32_t>(pad - kRecordHeaderBytes), RecordKind::kPad, 0, 0, 0, 0, 0, 0};
      head_ += pad;
    }
    pending_ = need;
    return reinterpret_cast<RecordHeader*>(data_ + (head_ & (size_ - 1)));
  }
  /// Publishes the record reserve() returned (and any pad before it).
  void commit() noexcept {
    head_ += pending_;
    pending_ = 0;
    // Release: the record's bytes before the head that covers them; pairs with the consumer's
    // acquire load of head.
    ctl_->head.store(head_, std::memory_order_release);
  }
  /// Bytes written and not yet consumed, as last seen (a recent value).
  uint64_t backlog() const noexcept { return head_ - tail_; }

 private:
  RingControl* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t head_ = 0;     // ours: the next byte to write
  uint64_t tail_ = 0;     // the consumer's, as last loaded
  uint64_t pending_ = 0;  // reserve() -> commit()
};

/// The consumer's side. Owner: one thread at a time (the engine's receive side).
class RingReader {
 public:
  enum class Status : uint8_t { kRecord, kEmpty, kCorrupt };

  RingReader() noexcept = default;
  RingReader(const void* area, uint64_t size) noexcept
      : ctl_(const_cast<RingControl*>(static_cast<const RingControl*>(area))),
        data_(static_cast<const uint8_t*>(area) + kRingControlBytes),
        size_(size),
        tail_(ctl_->tail.load(std::memory_order_relaxed)),
        head_(tail_),
        read_(tail_) {}

  bool valid() const noexcept { return ctl_ != nullptr; }
  /// Tells the producer our slot + 1 (RingControl::reader_slot).
  void set_reader_slot(uint32_t v) noexcept {
    ctl_->reader_slot.store(v, std::memory_order_seq_cst);
  }

  /// Whether a record may be waiting (a cheap look at the producer's head: one load).
  bool maybe_ready() const noexcept { return ctl_->head.load(std::memory_order_relaxed) != tail_; }

  /// The next record: its header (copied, checked) in *h and its payload at *payload (h->len
  /// bytes, valid until release()). Pad records are skipped. kCorrupt: the producer broke the
  /// ring; the reader is stuck there for good (the caller gives the link up).
  Status next(RecordHeader* h, const uint8_t** payload) noexcept {
    if (corrupt_) return Status::kCorrupt;
    for (;;) {
      if (read_ == head_) {
        // Acquire: pairs with the producer's release store; the records up to head are visible.
        const uint64_t head = ctl_->head.load(std::memory_order_acquire);
        if (head == read_) return Status::kEmpty;
        if (head - tail_ > size_ || (head & (kAlign - 1)) != 0) return fail();
        head_ = head;
      }
      const uint64_t off = read_ & (size_ - 1);
      std::memcpy(h, data_ + off, sizeof(*h));  // once: the producer may change it meanwhile
      const uint64_t bytes = record_bytes(h->len);
      if (h->len > size_ || off + bytes > size_ || read_ + bytes > head_) return fail();
      if (h->kind == RecordKind::kPad) {
        if (off + bytes != size_) return fail();  // a pad always ends the data area
        read_ += bytes;
        continue;
      }
      if (static_cast<uint8_t>(h->kind) == 0 || static_cast<uint8_t>(h->kind) > kRecordKindMax ||
          h->flags != 0)
        return fail();
      *payload = data_ + off + kRecordHeaderBytes;
      read_ += bytes;
      return Status::kRecord;
    }
  }
  /// Gives the bytes of every record next() returned back to the producer. The payloads are not
  /// to be read after this.
  void release() noexcept {
    if (read_ == tail_) return;
    tail_ = read_;
    // Release: our reads of the records before the producer's reuse of their bytes; pairs with
    // its acquire load of tail.
    ctl_->tail.store(tail_, std::memory_order_release);
  }
  bool corrupt() const noexcept { return corrupt_; }

 private:
  Status fail() noexcept {
    corrupt_ = true;
    return Status::kCorrupt;
  }
  RingControl* ctl_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t tail_ = 0;  // consumed and released
  uint64_t head_ = 0;  // the producer's, as last loaded
  uint64_t read_ = 0;  // next() position (tail_ <= read_ <= head_)
  bool corrupt_ = false;
};

}  // namespace dpfab::shm
