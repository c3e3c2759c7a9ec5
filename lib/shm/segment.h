// SPDX-License-Identifier: BSD-3-Clause
//
// Segments: the shared memory of same-host links (node.h), made by one process and handed to
// another as a file descriptor (SCM_RIGHTS), never by name.
//
// Where they live. By default a segment is an anonymous memfd, sealed against shrinking and
// growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL): no name exists, so nothing is ever left in
// /dev/shm, whatever happens to the processes, and neither end can truncate it under the other
// (an access past a truncated end would be a SIGBUS in the host process). With a directory
// (FI_DPDK_SHM_DIR: /dev/shm, a hugetlbfs mount, a tmpfs of its own size), a segment is a file
// there, created with mode 0600 (O_EXCL, named dpfab-shm.<uid>.<pid>.<random>), locked (flock)
// by its creator and unlinked as soon as it is mapped: only a process killed in between leaves
// it behind, and sweep() (run when a node starts) removes such files once their creator's lock is
// gone. Files cannot be sealed: a peer of the same user could truncate one (fi_dpdk(7) says so).
//
// Every segment, memfd or file, has mode 0600 (a memfd is made 0777 and reachable through
// /proc/<pid>/fd by whoever may ptrace its holder: it is closed to others all the same).
// Checks on a segment received from a peer (map_received): a regular file (memfd or tmpfs file)
// owned by our user, not readable or writable by group or others, at least the expected size.
//
// Threads: control path only (syscalls).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>

#include "common/fd.h"
#include "common/result.h"

namespace dpfab::shm {

/// A shared mapping (MAP_SHARED, read-write); unmapped on destruction. Move-only.
class Mapping {
 public:
  Mapping() noexcept = default;
  Mapping(void* addr, size_t len) noexcept : addr_(addr), len_(len) {}
  Mapping(Mapping&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  void* get() const noexcept { return addr_; }
  size_t size() const noexcept { return len_; }
  explicit operator bool() const noexcept { return addr_ != nullptr; }
  void reset() noexcept;

 private:
  void* addr_ = nullptr;
  size_t len_ = 0;
};

/// Makes a segment of `bytes` (zero-filled) and maps it: in `dir`, or an anonymous memfd when
/// `dir` is empty. `tag` names the memfd (/proc/<pid>/maps shows it).
/// @return the fd (to send) and the mapping; -FI_ENOMEM / -FI_EMFILE / -FI_EACCES with a message.
Result<std::pair<UniqueFd, Mapping>> create_segment(const std::string& dir, size_t bytes,
                                                    const char* tag);

/// Maps a segment a peer sent, after the checks above. `bytes`: the size expected.
/// @return the mapping; -FI_EINVAL naming the check that failed.
Result<Mapping> map_received(int fd, size_t bytes);

/// Removes the segment files in `dir` that this user's processes left behind (their creator's
/// lock is gone). @return how many were removed.
size_t sweep(const std::string& dir) noexcept;

}  // namespace dpfab::shm
