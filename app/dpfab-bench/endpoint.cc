// SPDX-License-Identifier: BSD-3-Clause
#include "endpoint.h"

#include <poll.h>
#include <rdma/fi_errno.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "fi_ext_dpdk.h"  // <rdma/fi_ext_dpdk.h> when installed

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dpfab::bench {

namespace {

fi_ep_type ep_type_of(const std::string& name) {
  if (name == "dgram") return FI_EP_DGRAM;
  if (name == "rdm") return FI_EP_RDM;
  return FI_EP_MSG;
}

// Milliseconds until deadline_ns for a blocking call's timeout: at least 1 (a blocking call with
// timeout 0 would be a poll), rounded up.
int ms_until(int64_t deadline_ns) {
  int64_t left = deadline_ns - now_ns();
  if (left <= 0) return 1;
  int64_t ms = (left + 999'999) / 1'000'000;
  return static_cast<int>(std::min<int64_t>(ms, 1'000'000));
}

fi_wait_obj wait_obj_of(Mode m) {
  switch (m) {
    case Mode::kSread:
      return FI_WAIT_UNSPEC;
    case Mode::kFd:
      return FI_WAIT_FD;
    case Mode::kPollfd:
      return FI_WAIT_POLLFD;
    case Mode::kWaitset:
      return FI_WAIT_SET;
    case Mode::kCond:
      return FI_WAIT_MUTEX_COND;
    case Mode::kYield:
      return FI_WAIT_YIELD;
    case Mode::kSpin:
    case Mode::kPollset:
    case Mode::kWorker:
      break;
  }
  return FI_WAIT_NONE;
}

const char* wait_obj_name(fi_wait_obj w) {
  switch (w) {
    case FI_WAIT_NONE:
      return "FI_WAIT_NONE";
    case FI_WAIT_UNSPEC:
      return "FI_WAIT_UNSPEC";
    case FI_WAIT_SET:
      return "FI_WAIT_SET";
    case FI_WAIT_FD:
      return "FI_WAIT_FD";
    case FI_WAIT_MUTEX_COND:
      return "FI_WAIT_MUTEX_COND";
    case FI_WAIT_YIELD:
      return "FI_WAIT_YIELD";
    case FI_WAIT_POLLFD:
      return "FI_WAIT_POLLFD";
  }
  return "?";
}

bool accepted_layer(const std::string& prov_name, const std::string& provider,
                    const std::string& layered) {
  if (prov_name == provider) return true;
  if (layered == "rxm") return prov_name == provider + ";ofi_rxm";
  if (layered == "all") return prov_name.rfind(provider + ";", 0) == 0;
  return false;
}

}  // namespace

std::string fi_error(const char* call, int ret) {
  int e = ret < 0 ? -ret : ret;
  return std::string(call) + ": " + fi_strerror(e) + " (" + std::to_string(ret) + ")";
}

InfoPtr choose_info(const std::string& provider, const std::string& ep_type,
                    const std::string& layered, const std::string& iface, std::string* why,
                    bool rma) {
  InfoPtr hints(fi_allocinfo());
  hints->caps = FI_MSG | (rma ? FI_RMA | FI_ATOMIC : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = ep_type_of(ep_type);
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(provider.c_str());
  fi_info* list = nullptr;
  int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints.get(), &list);
  InfoPtr owner(list);
  if (ret != 0) {
    *why = fi_error("fi_getinfo", ret);
    return nullptr;
  }
  // Exact provider first, then accepted layers; within each, the preferred interface first.
  const fi_info* best = nullptr;
  int best_rank = 99;
  for (const fi_info* i = list; i; i = i->next) {
    const char* pn = i->fabric_attr->prov_name;
    if (!pn || i->ep_attr->type != hints->ep_attr->type || !accepted_layer(pn, provider, layered))
      continue;
    int rank = (std::string(pn) == provider ? 0 : 2) +
               (i->domain_attr->name && iface == i->domain_attr->name ? 0 : 1);
    if (rank < best_rank) best = i, best_rank = rank;
  }
  if (!best) {
    *why = "no " + ep_type + " entry of " + provider + (rma ? " with FI_RMA | FI_ATOMIC" : "") +
           (layered == "none" ? "" : " (layers accepted: " + layered + ")");
    return nullptr;
  }
  return InfoPtr(fi_dupinfo(best));
}

Endpoint::~Endpoint() {
  if (worker_) wops_->worker_close(worker_);
  if (ep_) fi_close(&ep_->fid);
  if (pep_) fi_close(&pep_->fid);
  if (av_) fi_close(&av_->fid);
  if (pollset_ && waited_) fi_poll_del(pollset_, waited_, 0);
  if (cntr_) fi_close(&cntr_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (pollset_) fi_close(&pollset_->fid);
  if (waitset_) fi_close(&waitset_->fid);
  if (eq_) fi_close(&eq_->fid);
  if (mr_) fi_close(&mr_->fid);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  std::free(buf_);
}

std::string Endpoint::open(const fi_info* info, Mode mode, size_t buf_size, bool on_counter) {
  mode_ = mode;
  info_.reset(fi_dupinfo(info));
  int ret = fi_fabric(info_->fabric_attr, &fabric_, nullptr);
  if (ret) return fi_error("fi_fabric", ret);
  ret = fi_domain(fabric_, info_.get(), &domain_, nullptr);
  if (ret) return fi_error("fi_domain", ret);

  if (mode == Mode::kWaitset) {
    fi_wait_attr wa{};
    wa.wait_obj = FI_WAIT_UNSPEC;
    ret = fi_wait_open(fabric_, &wa, &waitset_);
    if (ret) return fi_error("fi_wait_open", ret);
  } else if (mode == Mode::kPollset) {
    fi_poll_attr pa{};
    ret = fi_poll_open(domain_, &pa, &pollset_);
    if (ret) return fi_error("fi_poll_open", ret);
  } else if (mode == Mode::kWorker) {
    ret = fi_open_ops(&domain_->fid, FI_DPDK_WORKER_OPS, 0, reinterpret_cast<void**>(&wops_),
                      nullptr);
    if (ret) return fi_error("fi_open_ops(" FI_DPDK_WORKER_OPS ")", ret);
  }

  // Buffers: as large as the largest size the endpoint can send (kMaxBufferBytes at most), and
  // no more of them than kMaxPoolBytes holds (at least 4 each way).
  max_size_ = std::min<size_t>({buf_size, info_->ep_attr->max_msg_size, kMaxBufferBytes});
  buf_size_ = (std::max<size_t>(max_size_, kMinSize) + 63) / 64 * 64;
  size_t fit = std::max<size_t>(kMaxPoolBytes / 2 / buf_size_, 4);
  rx_count_ =
      static_cast<uint32_t>(std::clamp<size_t>(info_->rx_attr->size, 4, std::min<size_t>(fit, 64)));
  tx_count_ =
      static_cast<uint32_t>(std::clamp<size_t>(info_->tx_attr->size, 4, std::min<size_t>(fit, 64)));
  fi_cq_attr ca{};
  ca.size = 256;
  ca.format = FI_CQ_FORMAT_MSG;
  ca.wait_obj = on_counter ? FI_WAIT_NONE : wait_obj_of(mode);
  ca.wait_cond = FI_CQ_COND_NONE;
  ca.wait_set = on_counter ? nullptr : waitset_;
  ret = fi_cq_open(domain_, &ca, &cq_, nullptr);
  if (ret)
    return fi_error((std::string("fi_cq_open(") + wait_obj_name(ca.wait_obj) + ")").c_str(), ret);
  waited_ = &cq_->fid;
  if (on_counter) {
    // The mode waits on a counter of send and receive completions; the CQ (FI_WAIT_NONE) is only
    // read, to learn which buffers completed.
    fi_cntr_attr na{};
    na.events = FI_CNTR_EVENTS_COMP;
    na.wait_obj = wait_obj_of(mode);
    na.wait_set = waitset_;
    ret = fi_cntr_open(domain_, &na, &cntr_, nullptr);
    if (ret)
      return fi_error((std::string("fi_cntr_open(") + wait_obj_name(na.wait_obj) + ")").c_str(),
                      ret);
    waited_ = &cntr_->fid;
  }

  if (mode == Mode::kFd) {
    ret = fi_control(waited_, FI_GETWAIT, &wait_fd_);
    if (ret) return fi_error("fi_control(FI_GETWAIT)", ret);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    if (epoll_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wait_fd_, &ev) != 0)
      return std::string("epoll on the FI_GETWAIT fd: ") + std::strerror(errno);
  } else if (mode == Mode::kPollfd) {
    fi_wait_pollfd pfd{};
    ret = fi_control(waited_, FI_GETWAIT, &pfd);
    if (ret && ret != -FI_ETOOSMALL) return fi_error("fi_control(FI_GETWAIT, pollfd)", ret);
    pollfds_.resize(std::max<size_t>(pfd.nfds, 1));
    pfd.nfds = pollfds_.size();
    pfd.fd = pollfds_.data();
    ret = fi_control(waited_, FI_GETWAIT, &pfd);
    if (ret) return fi_error("fi_control(FI_GETWAIT, pollfd)", ret);
    pollfds_.resize(pfd.nfds);
  } else if (mode == Mode::kPollset) {
    ret = fi_poll_add(pollset_, waited_, 0);
    if (ret) return fi_error("fi_poll_add", ret);
  } else if (mode == Mode::kWorker) {
    ret = wops_->worker_open(domain_, nullptr, &worker_);
    if (ret) return fi_error("worker_open", ret);
    ret = wops_->worker_add(worker_, waited_);
    if (ret) return fi_error("worker_add", ret);
    ret = wops_->get_efd(worker_, &wait_fd_);
    if (ret) return fi_error("get_efd", ret);
  }

  size_t total = buf_size_ * (rx_count_ + tx_count_);
  buf_ = static_cast<char*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  if (!buf_) return "out of memory for buffers";
  std::memset(buf_, 0, total);
  if (info_->domain_attr->mr_mode & FI_MR_LOCAL) {
    ret = fi_mr_reg(domain_, buf_, total, FI_SEND | FI_RECV, 0, 0, 0, &mr_, nullptr);
    if (ret) return fi_error("fi_mr_reg", ret);
    desc_ = fi_mr_desc(mr_);
  }
  ctx_.resize(rx_count_ + tx_count_);
  for (uint32_t i = 0; i < rx_count_ + tx_count_; i++) {
    ctx_[i].rx = i < rx_count_;
    ctx_[i].slot = ctx_[i].rx ? i : i - rx_count_;
  }
  for (uint32_t i = tx_count_; i > 0; i--) tx_free_.push_back(i - 1);

  if (info_->ep_attr->type == FI_EP_MSG) {
    fi_eq_attr ea{};
    ea.size = 16;
    ea.wait_obj = FI_WAIT_UNSPEC;
    ret = fi_eq_open(fabric_, &ea, &eq_, nullptr);
    if (ret) return fi_error("fi_eq_open", ret);
    return "";
  }
  fi_av_attr aa{};
  aa.type = info_->domain_attr->av_type;
  aa.count = 4;
  ret = fi_av_open(domain_, &aa, &av_, nullptr);
  if (ret) return fi_error("fi_av_open", ret);
  return open_ep(info_.get());
}

std::string Endpoint::open_ep(fi_info* info) {
  int ret = fi_endpoint(domain_, info, &ep_, nullptr);
  if (ret) return fi_error("fi_endpoint", ret);
  if (av_ && (ret = fi_ep_bind(ep_, &av_->fid, 0))) return fi_error("fi_ep_bind(av)", ret);
  if (eq_ && (ret = fi_ep_bind(ep_, &eq_->fid, 0))) return fi_error("fi_ep_bind(eq)", ret);
  if ((ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)))
    return fi_error("fi_ep_bind(cq)", ret);
  if (cntr_ && (ret = fi_ep_bind(ep_, &cntr_->fid, FI_SEND | FI_RECV)))
    return fi_error("fi_ep_bind(cntr)", ret);
  if ((ret = fi_enable(ep_))) return fi_error("fi_enable", ret);
  return post_all_rx();
}

std::string Endpoint::post_all_rx() {
  for (uint32_t i = 0; i < rx_count_; i++) {
    int ret = repost(i);
    if (ret) return fi_error("fi_recv", ret);
  }
  return "";
}

std::string Endpoint::local_name(std::string* name, bool msg_server) {
  fid* f = nullptr;
  if (msg_server) {
    int ret = fi_passive_ep(fabric_, info_.get(), &pep_, nullptr);
    if (ret) return fi_error("fi_passive_ep", ret);
    if ((ret = fi_pep_bind(pep_, &eq_->fid, 0))) return fi_error("fi_pep_bind", ret);
    if ((ret = fi_listen(pep_))) return fi_error("fi_listen", ret);
    f = &pep_->fid;
  } else {
    f = &ep_->fid;
  }
  char addr[512];
  size_t len = sizeof(addr);
  int ret = fi_getname(f, addr, &len);
  if (ret) return fi_error("fi_getname", ret);
  name->assign(addr, len);
  return "";
}

std::string Endpoint::add_peer(const std::string& name) {
  int ret = fi_av_insert(av_, name.data(), 1, &peer_, 0, nullptr);
  if (ret != 1) return fi_error("fi_av_insert", ret);
  return "";
}

namespace {

// A CM event with room for connection data after the entry (whose data member is flexible).
struct CmEvent {
  alignas(fi_eq_cm_entry) unsigned char bytes[sizeof(fi_eq_cm_entry) + 256];
  fi_eq_cm_entry* entry() { return reinterpret_cast<fi_eq_cm_entry*>(bytes); }
};

// Waits for one EQ event of kind `want` within timeout_ms. Returns "" or an error.
std::string eq_expect(fid_eq* eq, uint32_t want, int timeout_ms, CmEvent* ev) {
  uint32_t event = 0;
  ssize_t n = fi_eq_sread(eq, &event, ev, sizeof(*ev), timeout_ms, 0);
  if (n == -FI_EAVAIL) {
    fi_eq_err_entry err{};
    fi_eq_readerr(eq, &err, 0);
    return std::string("connection error: ") + fi_strerror(err.err);
  }
  if (n < 0) return fi_error("fi_eq_sread", static_cast<int>(n));
  if (event != want)
    return "unexpected connection event " + std::to_string(event) + " (wanted " +
           std::to_string(want) + ")";
  return "";
}

}  // namespace

std::string Endpoint::accept(int timeout_ms) {
  CmEvent ev{};
  std::string e = eq_expect(eq_, FI_CONNREQ, timeout_ms, &ev);
  if (!e.empty()) return e;
  InfoPtr req(ev.entry()->info);
  if (!(e = open_ep(req.get())).empty()) return e;
  int ret = fi_accept(ep_, nullptr, 0);
  if (ret) return fi_error("fi_accept", ret);
  return eq_expect(eq_, FI_CONNECTED, timeout_ms, &ev);
}

std::string Endpoint::connect(const std::string& name, int timeout_ms) {
  std::string e = open_ep(info_.get());
  if (!e.empty()) return e;
  int ret = fi_connect(ep_, name.data(), nullptr, 0);
  if (ret) return fi_error("fi_connect", ret);
  CmEvent ev{};
  return eq_expect(eq_, FI_CONNECTED, timeout_ms, &ev);
}

int Endpoint::repost(uint32_t slot) {
  for (int tries = 0;; tries++) {
    ssize_t ret = fi_recv(ep_, buf_ + static_cast<size_t>(slot) * buf_size_, buf_size_, desc_,
                          FI_ADDR_UNSPEC, &ctx_[slot]);
    if (ret != -FI_EAGAIN || tries > 1000) return static_cast<int>(ret);
    if (read_cq() < 0) return -FI_EIO;
  }
}

int Endpoint::handle(const fi_cq_msg_entry* e, ssize_t n) {
  for (ssize_t i = 0; i < n; i++) {
    auto* c = static_cast<Ctx*>(e[i].op_context);
    if (!c) continue;
    if (c->rx)
      rx_ready_.push_back({buf_ + static_cast<size_t>(c->slot) * buf_size_, e[i].len, c->slot});
    else
      tx_free_.push_back(c->slot);
  }
  return static_cast<int>(n);
}

ssize_t Endpoint::read_cq() {
  // The counter's value before the CQ is found empty: a wait on the counter then waits for more.
  if (cntr_) cntr_seen_ = fi_cntr_read(cntr_) + fi_cntr_readerr(cntr_);
  fi_cq_msg_entry e[16];
  ssize_t n = fi_cq_read(cq_, e, 16);
  if (timed_out_ && (n > 0 || n == -FI_EAVAIL)) missed_++;
  timed_out_ = false;
  if (n > 0) return handle(e, n);
  if (n == -FI_EAGAIN) return 0;
  if (n != -FI_EAVAIL) {
    if (error_.empty()) error_ = fi_error("fi_cq_read", static_cast<int>(n));
    return n;
  }
  fi_cq_err_entry err{};
  n = fi_cq_readerr(cq_, &err, 0);
  if (n < 0) return 0;
  if (err.err != FI_ECANCELED && error_.empty())
    error_ = std::string("error completion: ") +
             fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
  if (auto* c = static_cast<Ctx*>(err.op_context)) {
    if (c->rx)
      repost(c->slot);
    else
      tx_free_.push_back(c->slot);
  }
  return 1;
}

int Endpoint::wait_step(int64_t deadline_ns) {
  int ret = 0;
  if (cntr_) {
    switch (mode_) {
      case Mode::kSpin:  // fi_cntr_read until the counter moves
        while (fi_cntr_read(cntr_) + fi_cntr_readerr(cntr_) == cntr_seen_ &&
               now_ns() < deadline_ns) {
        }
        return 0;
      case Mode::kSread:
      case Mode::kCond:
      case Mode::kYield:
        ret = fi_cntr_wait(cntr_, cntr_seen_ + 1, ms_until(deadline_ns));
        if (ret == 0 || ret == -FI_EAVAIL) {
          wakeups_++;
          return 0;
        }
        if (ret == -FI_ETIMEDOUT || ret == -FI_EAGAIN) {
          timed_out_ = true;
          return 0;
        }
        if (ret == -FI_EINTR) return 0;
        if (error_.empty()) error_ = fi_error("fi_cntr_wait", ret);
        return ret;
      default:
        break;  // the others wait on the counter's fd, wait set, poll set or worker as on a CQ
    }
  }
  switch (mode_) {
    case Mode::kSpin:
    case Mode::kPollset:
      return 0;
    case Mode::kSread:
    case Mode::kCond:
    case Mode::kYield: {
      fi_cq_msg_entry e[16];
      ssize_t n = fi_cq_sread(cq_, e, 16, nullptr, ms_until(deadline_ns));
      if (n > 0) {
        wakeups_++;
        return handle(e, n);
      }
      if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) {
        timed_out_ = true;
        return 0;
      }
      if (n == -FI_EAVAIL) {
        wakeups_++;
        return static_cast<int>(read_cq());
      }
      ret = static_cast<int>(n);
      if (error_.empty()) error_ = fi_error("fi_cq_sread", ret);
      return ret;
    }
    case Mode::kFd:
    case Mode::kPollfd: {
      fid* f = waited_;
      ret = fi_trywait(fabric_, &f, 1);
      if (ret == -FI_EAGAIN) return 0;
      if (ret) {
        if (error_.empty()) error_ = fi_error("fi_trywait", ret);
        return ret;
      }
      int n;
      if (mode_ == Mode::kFd) {
        epoll_event ev;
        n = epoll_wait(epoll_fd_, &ev, 1, ms_until(deadline_ns));
      } else {
        n = poll(pollfds_.data(), pollfds_.size(), ms_until(deadline_ns));
      }
      if (n > 0) wakeups_++;
      if (n == 0) timed_out_ = true;
      if (n < 0 && errno != EINTR) {
        if (error_.empty()) error_ = std::string("epoll_wait/poll: ") + std::strerror(errno);
        return -FI_EIO;
      }
      return 0;
    }
    case Mode::kWaitset:
      ret = fi_wait(waitset_, ms_until(deadline_ns));
      if (ret == 0) {
        wakeups_++;
        return 0;
      }
      if (ret == -FI_ETIMEDOUT || ret == -FI_EAGAIN) timed_out_ = true;
      if (ret == -FI_ETIMEDOUT || ret == -FI_EAGAIN || ret == -FI_EINTR) return 0;
      if (error_.empty()) error_ = fi_error("fi_wait", ret);
      return ret;
    case Mode::kWorker: {
      ssize_t n = wops_->progress(worker_);
      if (n != 0) return n < 0 ? static_cast<int>(n) : 0;
      ret = wops_->arm(worker_);
      if (ret == -FI_EBUSY) return 0;
      if (ret) {
        if (error_.empty()) error_ = fi_error("worker arm", ret);
        return ret;
      }
      pollfd p{wait_fd_, POLLIN, 0};
      int pn = poll(&p, 1, ms_until(deadline_ns));
      if (pn > 0) wakeups_++;
      if (pn == 0) timed_out_ = true;
      return 0;
    }
  }
  return 0;
}

int Endpoint::wait_rx(int64_t deadline_ns) {
  for (;;) {
    if (!rx_ready_.empty()) return 1;
    if (mode_ == Mode::kPollset) {
      void* ctx[1];
      int r = fi_poll(pollset_, ctx, 1);
      if (r > 0) {
        // Drain: a counter is reported once per change, however many completions it counted.
        ssize_t n;
        while ((n = read_cq()) > 0) {
        }
        if (n < 0) return -FI_EIO;
        continue;
      }
      if (r < 0 && r != -FI_EAGAIN) {
        if (error_.empty()) error_ = fi_error("fi_poll", r);
        return r;
      }
    } else {
      ssize_t n = read_cq();
      if (n < 0) return static_cast<int>(n);
      if (n > 0) continue;
    }
    if (now_ns() >= deadline_ns) return 0;
    int r = wait_step(deadline_ns);
    if (r < 0) return r;
  }
}

bool Endpoint::pop_rx(Rx* rx) {
  if (rx_ready_.empty()) return false;
  *rx = rx_ready_.front();
  rx_ready_.pop_front();
  return true;
}

int Endpoint::acquire_tx(int64_t deadline_ns) {
  while (tx_free_.empty()) {
    // Waiting for a send completion: the same loop as for receives, minus the rx condition.
    ssize_t n = read_cq();
    if (n < 0) return static_cast<int>(n);
    if (n > 0) continue;
    if (now_ns() >= deadline_ns) return -FI_ETIMEDOUT;
    if (mode_ == Mode::kPollset) {
      void* ctx[1];
      fi_poll(pollset_, ctx, 1);
    } else {
      int r = wait_step(deadline_ns);
      if (r < 0) return r;
    }
  }
  uint32_t slot = tx_free_.back();
  tx_free_.pop_back();
  return static_cast<int>(slot);
}

int Endpoint::send(uint32_t slot, size_t len, int64_t deadline_ns) {
  for (;;) {
    ssize_t ret = fi_send(ep_, tx_buf(slot), len, desc_, peer_, &ctx_[rx_count_ + slot]);
    if (ret == 0) return 0;
    if (ret != -FI_EAGAIN) {
      tx_free_.push_back(slot);
      if (error_.empty()) error_ = fi_error("fi_send", static_cast<int>(ret));
      return static_cast<int>(ret);
    }
    if (read_cq() < 0 || now_ns() >= deadline_ns) {
      tx_free_.push_back(slot);
      return -FI_ETIMEDOUT;
    }
  }
}

}  // namespace dpfab::bench
