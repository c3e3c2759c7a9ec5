// SPDX-License-Identifier: BSD-3-Clause
/*
 * park_watch.pml -- Promela model of the two other sleep handshakes of the wake path, checked
 * with spin by check.sh:
 *
 * PARK (lib/progress/parker.h, lcores.cc): a worker lcore that found nothing parks; an
 * application thread that posts work (a receive, a send; consumer_polled) unparks it.
 *   lcore:   L1 efd = 0 (drain)  L2 parked = 1  L4 work? back out (exchange parked to 0)
 *            L5 block until efd  (then parked = 0 by the unparker; or a port fd)   L6
 *   waker:   W1 publish work  W2 fence  W3 if (parked && exchange(parked, 0)) efd = 1
 * A frame on an armed port also wakes the lcore; that is sleep_on_port.pml's handshake.
 *
 * WATCH (lib/progress/wakeup.h): a consumer (or a parked lcore) that needs the wakeup thread to
 * poll a port acquires a watch; the thread stops watching only when nobody needs it.
 *   acquirer:  A1 watchers++ (seq_cst)   A2 if (!watching) doorbell = 1
 *   thread:    stop: T1 watching = 0 (seq_cst)  T2 if (watchers > 0) watching = 1
 *              asleep: T3 block until doorbell; doorbell = 0; if (watchers > 0) watching = 1
 * Property: the thread never sleeps unwatching while a watcher holds a watch without a doorbell
 * pending (pan: an invalid end state, the acquirer waiting for a watch that never comes).
 *
 * Sequentially consistent memory: the store-buffering pairs (L2/W3, A1/T2) are checked under
 * x86-TSO by arm_trywait.pml's identical pattern; this model checks the orders. Variants:
 * PARK_CHECK_FIRST (the waker reads parked before it publishes), PARK_NO_RECHECK (the lcore
 * sleeps without L4), WATCH_CHECK_FIRST (the acquirer reads watching before it counts itself),
 * WATCH_NO_RECHECK (the thread stops without T2): each loses a wakeup.
 */

#ifndef NWORK
#define NWORK 3
#endif

/* ---- park ---- */
bool parked = 0;
bool efd = 0;
byte work = 0;
byte done = 0;

proctype lcore() {
  do
  :: atomic { work > 0 -> work--; done++ }     /* busy: a poll step found work */
  :: done == NWORK -> break
  :: atomic { work == 0 && done < NWORK -> skip };  /* idle for the spin budget: park */
     efd = 0;                                   /* L1 */
     parked = 1;                                /* L2 */
#ifndef PARK_NO_RECHECK
     if                                         /* L4 */
     :: atomic { work > 0 -> parked = 0 }; goto unparked
     :: atomic { work == 0 -> skip }
     fi;
#endif
     atomic { efd -> parked = 0 };              /* L5 (a spurious efd only loops) */
unparked:
     skip
  od
}

proctype waker() {
  byte i;
  for (i : 1 .. NWORK) {
#ifdef PARK_CHECK_FIRST
    bool was;
    was = parked;
    work++;
    atomic { if :: was && parked -> parked = 0; efd = 1 :: else -> skip fi }
#else
    work++;                                      /* W1, W2 */
    atomic { if :: parked -> parked = 0; efd = 1 :: else -> skip fi }   /* W3 */
#endif
  }
}

/* ---- watch ---- */
byte watchers = 0;
bool watching = 0;
bool doorbell = 0;
bool served = 0;   /* the acquirer saw the port watched: what it waited for */

proctype acquirer() {
#ifdef WATCH_CHECK_FIRST
  bool was;
  was = watching;
  watchers++;
  if :: !was -> doorbell = 1 :: else -> skip fi;
#else
  watchers++;                                    /* A1 */
  if :: !watching -> doorbell = 1 :: else -> skip fi;   /* A2 */
#endif
  atomic { watching -> served = 1 }               /* its sleep is covered */
}

proctype thread() {
  watching = 1;                                  /* watching for an earlier watcher */
  /* the earlier watcher left; after the linger, stop */
  watching = 0;                                  /* T1 */
#ifndef WATCH_NO_RECHECK
  if :: watchers > 0 -> watching = 1; goto out :: else -> skip fi;   /* T2 */
#endif
  atomic { doorbell -> doorbell = 0 };           /* T3 */
  if :: watchers > 0 -> watching = 1 :: else -> skip fi;
out:
  skip
}

init {
  atomic {
    run lcore();
    run waker();
    run acquirer();
    run thread();
  }
  (_nr_pr == 1) ->
  assert(done == NWORK && served)
}
