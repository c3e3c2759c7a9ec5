// SPDX-License-Identifier: BSD-3-Clause
/*
 * arm_trywait.pml -- Promela model of the dpfab arm / trywait / signal
 * wakeup protocol, checked with spin (see check.sh and README.md).
 *
 * ======================================================================
 * 1. The protocol being modelled
 * ======================================================================
 *
 * Every waitable object (CQ, EQ, counter) has
 *   - a queue of entries          (here: one SPSC ring per producer),
 *   - std::atomic<bool> armed     (here: mem[ARMED]),
 *   - a signal, an eventfd        (here: efd), on which a consumer blocks
 *                                  in epoll_wait()/poll().
 *
 * Consumer (fi_trywait() / UCP-style arm, then block), C++ vs. model:
 *
 *   C1  eventfd_read(efd)            drain the signal (reset to 0)
 *                                    model: d_step { fence_(t); efd = 0 }
 *   C2  armed.store(true, seq_cst)   model: st(t, ARMED, 1) into the
 *                                    consumer's store buffer, followed
 *                                    by fence_(t) (x86: xchg / mov+mfence)
 *   C3  if (!queue.empty()) {        model: ld() of every ring tail
 *         armed.exchange(false);     model: xchg(t, ARMED, 0, was)
 *         return -FI_EAGAIN;         -> C5
 *       }
 *       return FI_SUCCESS;           -> C4
 *   C4  epoll_wait(efd)              model: block until efd > 0
 *   C5  while (fi_cq_read(...) > 0)  model: consume every published entry,
 *         ;                                 asserting each entry is seen
 *       goto C1;                            exactly once
 *
 * Producer (progress engine / lcore), per event:
 *
 *   P1  ring[tail] = ev;             model: st() of the slot and of the
 *       tail.store(tail+1, release)  tail into the producer's store buffer
 *   P2  std::atomic_thread_fence(    model: fence_(p)
 *           seq_cst)
 *   P3  if (armed.exchange(false))   model: xchg(p, ARMED, 0, was)
 *   P4    eventfd_write(efd, 1);     model: d_step { fence_(p); efd = 1 }
 *
 * Signaller (fi_cq_signal() / ucp_worker_signal() from any thread):
 *
 *   S1  eventfd_write(efd, 1)        model: efd = 1, nondeterministically
 *                                    done once or not at all.
 *
 * ======================================================================
 * 2. Memory model: x86-TSO store buffers
 * ======================================================================
 *
 * Promela itself is sequentially consistent, so "removing a fence" would
 * change nothing.  We therefore model TSO explicitly:
 *
 *   - every thread t has a FIFO store buffer sb_a/sb_v[SB(t, 0..CAP-1)],
 *     sb_n[t] entries long; a plain store st() appends to it;
 *   - a load ld() returns the newest buffered value for that address from
 *     the thread's own buffer, else the value in shared memory mem[];
 *   - a flusher process per thread moves the oldest buffered store to
 *     memory at any (nondeterministic) time;
 *   - fence_() (mfence, and every lock-prefixed RMW such as xchg) empties
 *     the buffer before the thread continues.  Doing that in one atomic
 *     step loses no behaviour, because every partial flush that another
 *     thread could observe in between is also produced by the flusher.
 *   - eventfd read/write are syscalls that take the eventfd's wait-queue
 *     spinlock (a locked RMW), so they are full fences as well.
 *
 * Simplifications: the queue is one SPSC ring per producer whose tail is
 * published with a plain (release) store -- the weakest, lock-free case;
 * an MPSC enqueue using a CAS or a lock would itself be a locked RMW and
 * fence.  Ring heads are written only in C5 and go straight to memory (a
 * single consumer owns them; with several consumers they are updated
 * under the CQ lock); a stale head can only make C3 answer "busy", which
 * is the safe direction.  The eventfd counter is modelled as 0 / 1, which
 * is all that "readable or not" depends on.
 *
 * This is exactly what is needed to exhibit the store->load reordering of
 * the classic store-buffering (Dekker) pattern at the heart of the
 * protocol:
 *        producer:  store tail  ; load armed   (P1 ; P3)
 *        consumer:  store armed ; load tail    (C2 ; C3)
 * Without a fence on a side, both loads may return the old values.
 *
 * ======================================================================
 * 3. Why no wakeup is lost (correct protocol)
 * ======================================================================
 *
 * Let a consumer run C1..C3, decide "empty" and block in C4.  Write
 *   Td  time of its C1 drain,
 *   Ta  time its C2 store armed=1 reached memory,
 *   Tc  time of its C3 loads of the tails.
 * Program order plus the C1 fence gives Td < Ta, and the C2 fence gives
 * Ta < Tc (the store is globally visible before the loads execute).
 * Take any event e that the C3 check did not see, published (tail store
 * reached memory) at Tp, with its producer's P3 exchange at Tx.  P2 (or
 * the xchg itself) gives Tp < Tx.  Because C3 did not see e, Tc < Tp, so
 *        Td < Ta < Tc < Tp < Tx.
 * The exchange at Tx reads armed.  armed was 1 at Ta and can only have
 * been cleared between Ta and Tx by
 *   (a) another producer's P3 exchange, which then returned true and
 *       performs P4 after Ta > Td; or
 *   (b) a consumer's C3 busy path -- not this consumer (it took the empty
 *       path); with several consumers, that other consumer is awake, will
 *       run C5 and then re-arm and re-check (C1..C3) later, so the
 *       responsibility for e moves to it and the same argument applies.
 * Otherwise armed is still 1 at Tx, the exchange returns true, and P4
 * writes efd after Tx > Td.  In every case an eventfd write happens after
 * this consumer's drain Td, and only a C1 drain resets efd, so either efd
 * is 1 when the consumer reaches C4 (it does not block), or the write
 * wakes it; it then runs C5 and consumes e (or e was already consumed by
 * another consumer that itself passed C1 after the write).
 * A signaller write only adds wakeups; a spurious wakeup just re-runs
 * C5 (finding nothing) and loops to C1.  By induction over the finitely
 * many events, every event is consumed, and the CQ-read assertion checks
 * that each is consumed exactly once.
 *
 * ======================================================================
 * 4. Broken variants (selected with spin -D...)
 * ======================================================================
 *
 * NO_CONSUMER_FENCE   C2 becomes armed.store(true, relaxed/release): a
 *     plain mov that may sit in the store buffer while C3 loads the tails.
 *     Then Tc < Ta is possible: consumer reads "empty" (Tc < Tp), the
 *     producer's exchange at Tx < Ta reads armed == 0 from memory (the 1
 *     is still buffered) and does not signal -> consumer blocks forever.
 *     spin: invalid end state.
 *
 * NO_PRODUCER_FENCE   P2 removed.  On TSO this alone is NOT a bug: the
 *     P3 exchange compiles to a lock-prefixed xchg, which drains the
 *     store buffer before it reads armed, so Tp < Tx still holds and the
 *     model verifies.  The fence must nevertheless stay in the C++ code:
 *     under the C++ memory model (and on ARMv8/POWER) a release store of
 *     the tail followed by an RMW on a different location does not forbid
 *     the store->load reordering.  The TSO model cannot show that.
 *
 * PRODUCER_FAST_PATH  P3 becomes the common optimisation
 *         if (armed.load(relaxed) && armed.exchange(false))
 *     (avoid the locked RMW / cache-line bounce when nobody is armed).
 *     With P2 in place this is still correct.  Combined with
 *     NO_PRODUCER_FENCE the plain load of armed is not a fence: it can
 *     read armed == 0 while the tail store is still buffered (Tx < Tp),
 *     the SB pattern again -> lost wakeup.  This is the variant that shows
 *     why the producer fence exists on x86 too.
 *
 * NO_FENCE            both NO_CONSUMER_FENCE and NO_PRODUCER_FENCE.
 *
 * NO_DRAIN_BEFORE_CHECK  C1 moved to after C3 (just before C4): a
 *     producer can publish, exchange armed and write efd in the window
 *     between the consumer's C3 check and its drain; the drain then
 *     resets that signal and the consumer blocks with a non-empty queue.
 *     This race exists even under sequential consistency.
 *
 * ======================================================================
 * 5. Property
 * ======================================================================
 *
 * The consumer leaves its C4 wait either when efd > 0 or -- a model-only
 * exit that stands for "the test is over" -- when every producer has
 * finished and every event has been consumed.  A lost wakeup therefore
 * shows up as a state in which the consumer waits in C4 with efd == 0 and
 * an unconsumed event while all producers/signaller have terminated and
 * all store buffers are empty: nothing can move, and pan reports an
 * "invalid end state" (deadlock).  Assertions additionally check every
 * event is read exactly once, with its payload visible (TSO keeps the
 * slot store ahead of the tail store), and that the store buffers never
 * overflow the modelled capacity.
 *
 * Size knobs: NPROD (producers, default 2), NEV (events per producer,
 * default 2), NCONS (consumers sharing the CQ and its eventfd, default 1;
 * with NCONS > 1 the C5 read of one entry is done under the CQ lock,
 * which is a locked RMW and therefore a fence).  NO_SIGNALLER drops the
 * fi_cq_signal() thread.
 */

#ifndef NPROD
#define NPROD 2
#endif
#ifndef NEV
#define NEV 2
#endif
#ifndef NCONS
#define NCONS 1
#endif

#ifdef NO_FENCE
#define NO_CONSUMER_FENCE
#define NO_PRODUCER_FENCE
#endif

#define NTHR    (NPROD + NCONS)          /* threads with a store buffer   */
#define TOTAL   (NPROD * NEV)            /* events produced in total      */
#define CAP     (2 * NEV)                /* store buffer capacity         */

/* Shared memory layout. */
#define ARMED       0
#define TAIL(p)     (1 + (p))
#define SLOT(p, k)  (1 + NPROD + (p) * NEV + (k))
#define NADDR       (1 + NPROD + NPROD * NEV)
/* Event payload, never 0, so a slot read before its store is detectable. */
#define EVID(p, k)  (1 + (p) * NEV + (k))

#define SB(t, i)    ((t) * CAP + (i))

byte mem[NADDR];                 /* shared memory (armed, tails, slots)   */
byte sb_a[NTHR * CAP];           /* store buffers: address ...            */
byte sb_v[NTHR * CAP];           /*                ... and value          */
byte sb_n[NTHR];                 /*                ... and fill level     */

byte efd;                        /* eventfd counter (only 0 / non-0 matters) */
byte head[NPROD];                /* ring heads, owned by the consumer(s)  */
byte nconsumed;                  /* entries returned by fi_cq_read        */
bool seen[TOTAL + 1];            /* exactly-once bookkeeping              */
byte prod_done;                  /* producers that have finished          */

hidden byte i_;                  /* scratch, only used inside d_step      */
hidden byte j_;

/* ---------------------------------------------------------------------
 * TSO primitives.  The un-suffixed ones must be used inside a d_step.
 * ------------------------------------------------------------------- */

/* Plain store: append to the thread's store buffer. */
inline st(t, a, v)
{
	assert(sb_n[t] < CAP);
	sb_a[SB(t, sb_n[t])] = a;
	sb_v[SB(t, sb_n[t])] = v;
	sb_n[t]++
}

/* Plain load: newest own buffered store to a, else memory. */
inline ld(t, a, r)
{
	r = mem[a];
	i_ = sb_n[t];
	do
	:: i_ > 0 ->
		i_--;
		if
		:: sb_a[SB(t, i_)] == (a) ->
			r = sb_v[SB(t, i_)];
			break
		:: else -> skip
		fi
	:: else -> break
	od;
	i_ = 0
}

/* Move the oldest buffered store of thread t to memory. */
inline fl(t)
{
	mem[sb_a[SB(t, 0)]] = sb_v[SB(t, 0)];
	j_ = 0;
	do
	:: j_ + 1 < sb_n[t] ->
		sb_a[SB(t, j_)] = sb_a[SB(t, j_ + 1)];
		sb_v[SB(t, j_)] = sb_v[SB(t, j_ + 1)];
		j_++
	:: else -> break
	od;
	sb_n[t]--;
	sb_a[SB(t, sb_n[t])] = 0;     /* keep the state canonical */
	sb_v[SB(t, sb_n[t])] = 0;
	j_ = 0
}

/* mfence / effect of any locked instruction: drain the store buffer. */
inline fence_(t)
{
	do
	:: sb_n[t] > 0 -> fl(t)
	:: else -> break
	od;
	j_ = 0                        /* d_step must not end in a loop exit */
}

/* One indivisible step each. */
inline load(t, a, r)
{
	d_step { ld(t, a, r) }
}

/* std::atomic exchange == lock xchg on x86: full fence + atomic RMW. */
inline xchg(t, a, v, r)
{
	d_step { fence_(t); r = mem[a]; mem[a] = v }
}

/* ---------------------------------------------------------------------
 * Processes
 * ------------------------------------------------------------------- */

/* The memory subsystem draining thread t's store buffer in the background. */
proctype flusher(byte t)
{
end_flush:
	do
	:: d_step { sb_n[t] > 0 -> fl(t) }
	od
}

/* Progress engine / lcore producing NEV events into its ring. */
proctype producer(byte p)
{
	byte k = 0;
	bool was = false;

	do
	:: k < NEV ->
		/* P1: write the entry, publish the tail (release store). */
		d_step {
			st(p, SLOT(p, k), EVID(p, k));
			st(p, TAIL(p), k + 1)
		};
#ifndef NO_PRODUCER_FENCE
		/* P2: std::atomic_thread_fence(seq_cst) == mfence. */
		d_step { fence_(p) };
#endif
#ifdef PRODUCER_FAST_PATH
		/* P3': if (armed.load(relaxed) && armed.exchange(false)) */
		load(p, ARMED, was);
		if
		:: was -> xchg(p, ARMED, 0, was)
		:: else -> skip
		fi;
#else
		/* P3: if (armed.exchange(false)) */
		xchg(p, ARMED, 0, was);
#endif
		/* P4: eventfd_write(efd, 1) (a syscall: fence). */
		d_step {
			if
			:: was -> fence_(p); efd = 1
			:: else -> skip
			fi;
			was = false;
			k++
		}
	:: else -> break
	od;
	prod_done++
}

/* A consumer thread: trywait (C1..C3), block (C4), read the CQ (C5). */
proctype consumer(byte c)
{
	byte t = NPROD + c;
	byte p = 0;
	byte tl = 0;
	byte ev = 0;
	bool busy = false;
	bool was = false;

	do
	::
#ifndef NO_DRAIN_BEFORE_CHECK
		/* C1: drain the signal (eventfd read, a syscall: fence). */
		d_step { fence_(t); efd = 0 };
#endif
		/* C2: armed.store(true, ...) -- the plain-store part. */
		d_step { st(t, ARMED, 1) };
#ifndef NO_CONSUMER_FENCE
		/* C2: ... seq_cst: x86 emits xchg (or mov + mfence). */
		d_step { fence_(t) };
#endif
		/* C3: re-check the queue, one ring tail load per step. */
		do
		:: p < NPROD && !busy ->
			d_step {
				ld(t, TAIL(p), tl);
				if
				:: tl != head[p] -> busy = true
				:: else -> skip
				fi;
				tl = 0;
				p++
			}
		:: else -> p = 0; break
		od;
		if
		:: busy ->
			/* C3: armed.exchange(false); return -FI_EAGAIN. */
			xchg(t, ARMED, 0, was);
			d_step { was = false; busy = false }
		:: else ->
			/* C3: return FI_SUCCESS. */
#ifdef NO_DRAIN_BEFORE_CHECK
			/* Broken: drain the signal only after the re-check. */
			d_step { fence_(t); efd = 0 };
#endif
			/* C4: epoll_wait() on the eventfd until it is readable. */
			if
			:: efd > 0 -> skip
			:: prod_done == NPROD && nconsumed == TOTAL ->
				break           /* model-only: the test is over */
			fi
		fi;

		/* C5: fi_cq_read() until empty, checking exactly-once delivery. */
		do
		:: p < NPROD ->
			d_step {
#if NCONS > 1
				fence_(t);      /* CQ lock acquire (locked RMW) */
#endif
				ld(t, TAIL(p), tl);
				if
				:: tl != head[p] ->
					ld(t, SLOT(p, head[p]), ev);
					assert(ev == EVID(p, head[p]));
					assert(!seen[ev]);
					seen[ev] = true;
					head[p]++;
					nconsumed++
				:: else ->
					p++
				fi;
				tl = 0;
				ev = 0
			}
		:: else -> p = 0; break
		od
		/* ... and back to C1 */
	od;

	assert(nconsumed == TOTAL);
	assert(prod_done == NPROD)
}

#ifndef NO_SIGNALLER
/* fi_cq_signal() from an unrelated thread: at most once, at any time. */
proctype signaller()
{
	if
	:: efd = 1
	:: skip
	fi
}
#endif

init
{
	byte i = 0;

	atomic {
		do
		:: i < NTHR -> run flusher(i); i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < NPROD -> run producer(i); i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < NCONS -> run consumer(i); i++
		:: else -> break
		od;
#ifndef NO_SIGNALLER
		run signaller();
#endif
		i = 0
	}
}
