// SPDX-License-Identifier: BSD-3-Clause
/*
 * sleep_on_port.pml -- model of sleeping on the port (doc/design.md, "Sleeping on the port";
 * lib/progress/port_wake.h, PortEngine::prepare_sleep, Waitable::try_arm(on_fds)), checked with
 * spin by check.sh.
 *
 * What it adds to arm_trywait.pml: the consumers themselves progress the port, and sleep on the
 * port's wake fd (the memif kick eventfd) as well as on their object's signal. Two consumers, each
 * with its own CQ, share one port; a frame i goes to consumer i % 2. A third process, the peer,
 * sends frames and kicks.
 *
 *   peer (PortEngine::transmit + KickChannel::kick), per frame:
 *     S0  head++                      the frame is in the ring
 *     S1  fence                       (SC here)
 *     S2  if (flag) { flag = 0; kfd = 1 }     exchange, then eventfd write
 *
 *   poll step (PortEngine::poll_step), by any consumer: try-lock rx (taken: "busy"); deliver
 *   every frame between tail and head, one at a time: cq[dest]++, and if armed[dest]
 *   { armed[dest] = 0; sig[dest] = 1 } (the CQ's notify); release rx.
 *
 *   consumer c (fi_cq_read, then fi_trywait, then epoll on {sig[c], kfd}):
 *     R   poll step; consume its CQ
 *     C1  sig[c] = 0                  drain its own signal
 *     A1  if (!flag) kfd = 0          drain the kick fd when the peer cleared the flag
 *     A2  flag = 1                    arm the kick
 *     A3  poll steps until one owned the receive side and emptied the ring (a consumer that
 *         drained the kick fd must finish a poll itself: it waits out the holder of rx)
 *     C2  armed[c] = 1
 *     C3  cq[c] > 0: armed[c] = 0, back to R
 *     C4  block until sig[c] || kfd; back to R
 *
 * The property: no consumer blocks for ever while a frame for it exists (pan: invalid end state),
 * and every frame is consumed once (assertions). Memory is sequentially consistent here: the
 * store-buffering pairs (A2 before A3's read of head against S0 before S2's read of flag; C2
 * against notify) are the pattern arm_trywait.pml checks under x86-TSO with and without fences;
 * this model checks the orders and the sharing that are new: drain before arm, the drainer
 * re-arms before it polls, A3 must own the receive side, several sleepers on one fd.
 *
 * Variants (-D): ARM_AFTER_POLL (A2 after A3), DRAIN_AFTER_ARM (A1 after A2), A3_GIVES_UP (A3
 * finds rx taken and goes back to R instead of waiting for it: the frame that came after the
 * holder's burst, whose kick it drained, waits for ever if its CQ already had something),
 * BUSY_IS_SAFE (A3 reports safe when rx is taken), NO_REARM (a consumer that drained the kick fd
 * does not set the flag: it relies on the other sleeper): each loses a wakeup.
 */

#ifndef NEV
#define NEV 4
#endif

byte head = 0;      /* frames the peer put in the ring */
byte tail = 0;      /* frames taken by poll steps (under rx) */
bool rx = 0;        /* the receive side's try-lock */
bool flag = 0;      /* our kick flag, in the shared page */
bool kfd = 0;       /* the kick eventfd (level: readable while 1) */
byte cq[2];
bool armed[2];
bool sig[2];
byte got[2];

/* One poll step: returns busy = 1 when rx was taken. Delivers frames one at a time. */
inline poll_step(busy) {
  atomic { if :: rx -> busy = 1 :: else -> rx = 1; busy = 0 fi }
  if
  :: busy == 0 ->
     do
     :: atomic {
          tail < head ->
          cq[tail % 2]++;
          if :: armed[tail % 2] -> armed[tail % 2] = 0; sig[tail % 2] = 1 :: else -> skip fi;
          tail++
        }
     :: atomic { tail >= head -> break }
     od;
     rx = 0
  :: else -> skip
  fi
}

inline consume(c) {
  atomic { do :: cq[c] > 0 -> cq[c]--; got[c]++ :: else -> break od }
}

proctype peer() {
  byte i;
  for (i : 1 .. NEV) {
    head++;                                      /* S0 */
    atomic { if :: flag -> flag = 0; kfd = 1 :: else -> skip fi }  /* S1-S2 */
  }
}

proctype consumer(byte c) {
  bool busy;
read:
  poll_step(busy);                               /* R */
  consume(c);
  if :: got[c] == NEV / 2 -> goto done :: else -> skip fi;
  sig[c] = 0;                                    /* C1 */
#ifndef DRAIN_AFTER_ARM
  atomic { if :: !flag -> kfd = 0 :: else -> skip fi }   /* A1 */
#endif
#ifndef ARM_AFTER_POLL
#ifndef NO_REARM
  flag = 1;                                      /* A2 */
#else
  if :: c == 0 -> flag = 1 :: else -> skip fi;   /* consumer 1 drains but leaves arming to 0 */
#endif
#endif
#ifdef DRAIN_AFTER_ARM
  atomic { if :: !flag -> kfd = 0 :: else -> skip fi }
#endif
a3:
  poll_step(busy);                               /* A3 (one owned step empties the ring) */
#if defined(A3_GIVES_UP)
  if :: busy -> goto read :: else -> skip fi;
#elif !defined(BUSY_IS_SAFE)
  if :: busy -> atomic { !rx -> skip }; goto a3 :: else -> skip fi;   /* wait out the holder */
#endif
#ifdef ARM_AFTER_POLL
  flag = 1;
#endif
  armed[c] = 1;                                  /* C2 */
  if                                             /* C3 */
  :: atomic { cq[c] > 0 -> armed[c] = 0 }; goto read
  :: atomic { cq[c] == 0 -> skip }
  fi;
  atomic { (sig[c] || kfd) -> skip };            /* C4 */
  goto read;
done:
  skip
}

init {
  atomic {
    run peer();
    run consumer(0);
    run consumer(1);
  }
  (_nr_pr == 1) ->
  assert(got[0] == NEV / 2 && got[1] == NEV / 2);
  assert(tail == NEV)
}
