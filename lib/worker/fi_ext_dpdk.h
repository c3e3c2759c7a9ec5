/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fi_ext_dpdk.h: extensions of the libfabric "dpdk" provider (dpfab), installed as
 * <rdma/fi_ext_dpdk.h>. Plain C (C99 and later); usable from C++.
 *
 * ---- The worker: UCP-style wakeup ---------------------------------------------------------
 *
 * A worker gathers completion queues, counters and event queues and gives one thread the wake-up
 * routines of UCX's ucp_worker (get_efd, arm, wait, wait_mem, signal, progress) on top of the
 * provider's arm/trywait protocol. It is reached the libfabric way, through fi_open_ops on a
 * domain of this provider:
 *
 *     struct fi_dpdk_worker_ops *ops;
 *     struct fi_dpdk_worker *worker;
 *     int fd;
 *     fi_open_ops(&domain->fid, FI_DPDK_WORKER_OPS, 0, (void **)&ops, NULL);
 *     ops->worker_open(domain, NULL, &worker);
 *     ops->worker_add(worker, &cq->fid);
 *     ops->get_efd(worker, &fd);
 *     for (;;) {                                    // the loop of ucp_worker_arm(3)
 *         if (done()) break;                        // check the stop condition
 *         if (fi_cq_read(cq, ...) > 0 || ops->progress(worker) > 0) continue;
 *         if (ops->arm(worker) == 0)                // -FI_EBUSY: read/progress more first
 *             poll(&(struct pollfd){fd, POLLIN}, 1, timeout);
 *     }
 *     ops->worker_close(worker);
 *
 * The contract of every routine follows ucp_worker_get_efd / _arm / _wait / _wait_mem / _signal
 * (UCX 1.16), with libfabric's error convention: 0 on success, a negative -FI_E* code on failure.
 * UCS_ERR_BUSY is -FI_EBUSY.
 *
 * "Events" of a worker are those of its members: a CQ or an EQ has events while it is not empty
 * (entries or error entries to read), a counter has events while its value or error count has
 * changed since the application last read it (fi_cntr_read / fi_cntr_readerr). A signal (see
 * signal) is an event too, consumed by the next arm, wait or wait_mem that reports it. Members
 * may be opened with any wait object, FI_WAIT_NONE included: the worker has its own.
 *
 * Threads: signal may be called from any thread at any time. The other routines may be called
 * from any thread but are meant for the one thread that owns the worker; worker_add,
 * worker_remove and worker_close must not run concurrently with other calls on the same worker.
 */
#ifndef FI_EXT_DPDK_H
#define FI_EXT_DPDK_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Name of the worker operations for fi_open_ops(&domain->fid, FI_DPDK_WORKER_OPS, 0, &ops, NULL).
 * fi_open_ops returns 0 and sets ops to a struct fi_dpdk_worker_ops that stays valid for the life
 * of the process; -FI_ENOSYS for any other name, -FI_EINVAL for a null name or ops,
 * -FI_EBADFLAGS for non-zero flags. */
#define FI_DPDK_WORKER_OPS "dpdk_worker_v1"

/* Defaults of struct fi_dpdk_worker_attr, used when worker_open is given no attributes. */
#define FI_DPDK_WORKER_SPIN_NS_DEFAULT 5000u         /* wait_mem: busy-wait this long first */
#define FI_DPDK_WORKER_SLICE_MIN_NS_DEFAULT 50000u   /* then sleep in slices from 50 us ... */
#define FI_DPDK_WORKER_SLICE_MAX_NS_DEFAULT 1000000u /* ... doubling up to 1 ms */

/* Tuning of wait_mem. Other routines do not use it. */
struct fi_dpdk_worker_attr {
  uint64_t flags;        /* reserved: must be 0 */
  uint32_t spin_ns;      /* how long wait_mem watches the address in a busy loop (UMWAIT
                          * where the CPU has WAITPKG, PAUSE otherwise) before it sleeps;
                          * 0: sleep at once */
  uint32_t slice_min_ns; /* wait_mem sleeps on the worker's fd for this long at first ... */
  uint32_t slice_max_ns; /* ... doubling each quiet slice up to this; a change of the memory
                          * by a writer that does not call signal is noticed within one
                          * slice. 0 < slice_min_ns <= slice_max_ns. */
};

/* Opaque: a worker. */
struct fi_dpdk_worker;

struct fi_dpdk_worker_ops {
  /* sizeof(struct fi_dpdk_worker_ops) of the provider: routines are only ever appended, so a
   * routine is present when ops->size > offsetof(struct fi_dpdk_worker_ops, routine). */
  size_t size;

  /* Opens a worker on `domain` (a domain of this provider). `attr` may be NULL (defaults).
   * The domain cannot be closed (fi_close returns -FI_EBUSY) while a worker is open on it.
   * Returns 0 and sets *worker; -FI_EINVAL for a null or foreign domain, a null worker, non-zero
   * attr->flags or bad slices; -FI_ENOMEM; -FI_EMFILE when no eventfd can be made. */
  int (*worker_open)(struct fid_domain* domain, const struct fi_dpdk_worker_attr* attr,
                     struct fi_dpdk_worker** worker);

  /* Closes the worker: its members leave it (they stay open), its fd is closed. Blocked calls
   * on the worker must have returned (signal makes them return).
   * Returns 0; -FI_EINVAL for a null worker. */
  int (*worker_close)(struct fi_dpdk_worker* worker);

  /* Makes a CQ, counter or EQ (its fid: &cq->fid, &cntr->fid, &eq->fid) a member: its events
   * become events of the worker. A member that has events when it joins makes the next arm
   * return -FI_EBUSY. A member that is closed leaves the worker by itself.
   * Returns 0; -FI_EINVAL when fid is not a CQ, counter or EQ of this provider;
   * -FI_EALREADY when it is a member already; -FI_ENOSPC when the object is in too many wait
   * sets, poll sets and workers (16); -FI_ENOMEM. */
  int (*worker_add)(struct fi_dpdk_worker* worker, struct fid* fid);

  /* Removes a member. Returns 0; -FI_EINVAL for a fid that is not a CQ, counter or EQ;
   * -FI_ENOENT when it is not a member. */
  int (*worker_remove)(struct fi_dpdk_worker* worker, struct fid* fid);

  /* ucp_worker_get_efd: a file descriptor for poll/select/epoll (POLLIN) that becomes readable
   * when an event occurs after a successful arm, or when signal is called. It belongs to the
   * worker: do not read, write or close it (arm lowers it); it is valid until worker_close.
   * Returns 0 and sets *fd; -FI_EINVAL for a null argument. */
  int (*get_efd)(struct fi_dpdk_worker* worker, int* fd);

  /* ucp_worker_arm: turns on notification for the next event. Call it before every sleep on the
   * fd, once the previous events are processed. Runs one manual-progress step of the members.
   * Returns 0: the fd is lowered and becomes readable at the next event or signal;
   * -FI_EBUSY: a member has unprocessed events (read them, or call progress) or a signal came
   * since the last arm/wait/wait_mem (it is consumed by this return); the fd will not be
   * signalled for them, do not sleep;
   * -FI_EINVAL for a null worker. */
  int (*arm)(struct fi_dpdk_worker* worker);

  /* ucp_worker_wait: blocks until a member has events or signal is called, or `timeout`
   * milliseconds pass (negative: no limit). Like ucp_worker_wait it arms first, so it returns at
   * once while a member still has unprocessed events (drain them first) or a signal is pending.
   * The calling thread does not progress the domain while it sleeps.
   * Returns 0 on an event or a signal; -FI_ETIMEDOUT; -FI_EINTR when a POSIX signal interrupted
   * the sleep; -FI_EINVAL for a null worker. */
  int (*wait)(struct fi_dpdk_worker* worker, int timeout);

  /* ucp_worker_wait_mem: blocks until the `size`-byte value at `address` differs from the
   * value it held when the call began, a member has events, signal is called, or `timeout`
   * milliseconds pass (negative: no limit). size is 1, 2, 4 or 8 and address is aligned to it;
   * the value is read atomically with acquire order, so what the writer stored before it is
   * visible once this returns.
   * It first busy-waits for attr.spin_ns (UMWAIT on the address's cache line when the CPU has
   * WAITPKG, PAUSE otherwise), then sleeps on the worker's fd in slices (attr.slice_min_ns
   * doubling to attr.slice_max_ns), looking at the address between slices: an event or a signal
   * ends the sleep at once; a plain store by a writer that does not call signal is noticed
   * within one slice. A writer that wants an immediate wake-up stores, then calls signal.
   * Returns 0 when the memory changed, an event occurred or a signal came; -FI_ETIMEDOUT;
   * -FI_EINTR when a POSIX signal interrupted a sleep; -FI_EINVAL for a null worker or
   * address, a bad size or a misaligned address. */
  int (*wait_mem)(struct fi_dpdk_worker* worker, const volatile void* address, size_t size,
                  int timeout);

  /* ucp_worker_signal: makes a blocked wait or wait_mem return and the fd readable, even if no
   * event took place; if none is blocked, the next arm returns -FI_EBUSY (or the next wait /
   * wait_mem returns 0 at once), so a signal is never lost. Signals that were not yet consumed
   * coalesce into one. Any thread, any time; async-signal-safe.
   * Returns 0; -FI_EINVAL for a null worker. */
  int (*signal)(struct fi_dpdk_worker* worker);

  /* ucp_worker_progress: runs one manual-progress step of the worker's domain (polls its port
   * and delivers completions to CQs and counters; nothing under FI_PROGRESS_AUTO, where the
   * provider's lcores do it).
   * Returns how many events the step produced (0: none; drain-until-0 before arm);
   * -FI_EINVAL for a null worker. */
  ssize_t (*progress)(struct fi_dpdk_worker* worker);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_DPDK_H */
