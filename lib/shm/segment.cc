// SPDX-License-Identifier: BSD-3-Clause
#include "shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <rdma/fi_errno.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dpfab::shm {
namespace {

constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string prefix() { return "dpfab-shm." + std::to_string(getuid()) + "."; }

Result<Mapping> map_fd(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return make_error(-FI_ENOMEM,
                      std::string("shm: cannot map a segment: ") + std::strerror(errno));
  return Mapping(p, bytes);
}

}  // namespace

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    addr_ = std::exchange(o.addr_, nullptr);
    len_ = std::exchange(o.len_, 0);
  }
  return *this;
}

void Mapping::reset() noexcept {
  if (addr_) munmap(addr_, len_);
  addr_ = nullptr;
  len_ = 0;
}

Result<std::pair<UniqueFd, Mapping>> create_segment(const std::string& dir, size_t bytes,
                                                    const char* tag) {
  UniqueFd fd;
  std::string path;
  if (dir.empty()) {
    fd.reset(memfd_create(tag, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd.valid())
      return make_error(-FI_EMFILE, std::string("shm: memfd_create: ") + std::strerror(errno));
    // A memfd is made 0777 (it has no name to open, but /proc/<pid>/fd/<n> reaches it for
    // whoever may ptrace us): closed to others like any segment.
    if (fchmod(fd.get(), 0600) != 0 || ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0 ||
        fcntl(fd.get(), F_ADD_SEALS, kSeals) != 0)
      return make_error(-FI_ENOMEM, std::string("shm: sizing a segment: ") + std::strerror(errno));
  } else {
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) r = reinterpret_cast<uintptr_t>(&r);
    char name[96];
    std::snprintf(name, sizeof(name), "%s%d.%016llx", prefix().c_str(), getpid(),
                  static_cast<unsigned long long>(r));
    path = dir + "/" + name;
    fd.reset(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid())
      return make_error(-FI_EACCES,
                        "shm: cannot create a segment in " + dir + ": " + std::strerror(errno));
    // Held until the file is unlinked below: sweep() leaves a file alone while its lock is held.
    (void)flock(fd.get(), LOCK_EX | LOCK_NB);
    // The umask cannot widen 0600, but an inherited default ACL could: set it explicitly.
    (void)fchmod(fd.get(), 0600);
    if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
      const int e = errno;
      unlink(path.c_str());
      return make_error(-FI_ENOMEM, "shm: sizing a segment in " + dir + ": " + std::strerror(e));
    }
  }
  auto m = map_fd(fd.get(), bytes);
  if (!path.empty()) unlink(path.c_str());  // the fd travels, the name is never needed
  if (!m) return m.error();
  return std::pair<UniqueFd, Mapping>(std::move(fd), std::move(m.value()));
}

Result<Mapping> map_received(int fd, size_t bytes) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return make_error(-FI_EINVAL, "shm: segment: fstat failed");
  if (!S_ISREG(st.st_mode)) return make_error(-FI_EINVAL, "shm: segment is not a regular file");
  if (st.st_uid != geteuid()) return make_error(-FI_EINVAL, "shm: segment owned by another user");
  if (st.st_size < static_cast<off_t>(bytes))
    return make_error(-FI_EINVAL, "shm: segment smaller than announced");
  // Every segment (a memfd or a file of a directory) is closed to others: mode 0600.
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return make_error(-FI_EINVAL, "shm: segment open to group or others");
  return map_fd(fd, bytes);
}

size_t sweep(const std::string& dir) noexcept {
  if (dir.empty()) return 0;
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  const std::string want = prefix();
  size_t removed = 0;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, want.c_str(), want.size()) != 0) continue;
    const std::string path = dir + "/" + e->d_name;
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) continue;
    struct stat st {};
    if (fstat(fd.get(), &st) != 0 || st.st_uid != geteuid()) continue;
    // Its creator holds the lock until it unlinks the file: a lock we get means it is gone.
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (unlink(path.c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

}  // namespace dpfab::shm
