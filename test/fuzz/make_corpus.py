#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
# Writes the seed corpora of the fuzz targets (test/fuzz/corpus/<target>/), hand-made frames built
# here independently of lib/wire (own checksum code), each named "<expected verdict>--<what>" so
# that the corpus runner also checks the verdict. The files are checked in; run this again only to
# change them:  python3 test/fuzz/make_corpus.py
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

MAC1 = bytes.fromhex("020000000001")
MAC2 = bytes.fromhex("020000000002")  # the ARP target's own MAC
MAC3 = bytes.fromhex("020000000003")
BCAST = b"\xff" * 6
IP1 = bytes([10, 0, 0, 1])
IP2 = bytes([10, 0, 0, 2])  # the ARP target's own address
IP3 = bytes([10, 0, 0, 3])
GROUP = bytes([239, 1, 2, 3])
GROUP_MAC = bytes.fromhex("01005e010203")  # RFC 1112 6.4: 01:00:5e + the group's low 23 bits


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def frame(payload=b"hello dpfab!", *, version=2, typ=1, flags=1, plen=None, udp_len=None,
          ip_total=None, ip_vhl=0x45, options=b"", frag=0x4000, proto=17, ip_ck=None,
          udp_ck=None, ethertype=0x0800, pad=b"", cq_data=0x1122334455667788, src_ip=IP1,
          dst_ip=IP2, src_mac=MAC1, dst_mac=MAC2, v1=False):
    """One Ethernet frame. The dpfab header is wire version 2's (20 bytes, format.h), or with v1
    version 1's: 32 bytes, seq/ack/msg_id (0, as version 1 sent them) before cq_data."""
    if v1:
        hdr = struct.pack("!BBHHHIIIIQ", version, typ, flags, 3, 7,
                          len(payload) if plen is None else plen, 0, 0, 0, cq_data)
    else:
        hdr = struct.pack("!BBHHHIQ", version, typ, flags, 3, 7,
                          len(payload) if plen is None else plen, cq_data)
    ulen = 8 + len(hdr) + len(payload) if udp_len is None else udp_len
    body = hdr + payload
    ph = src_ip + dst_ip + struct.pack("!BBH", 0, 17, ulen)
    u = struct.pack("!HHHH", 9228, 9229, ulen, 0)
    if udp_ck is None:
        c = csum(ph + u + body)
        udp_ck = 0xFFFF if c == 0 else c
    u = struct.pack("!HHHH", 9228, 9229, ulen, udp_ck)
    ihl = 20 + len(options)
    total = ihl + 8 + len(body) if ip_total is None else ip_total
    ip = struct.pack("!BBHHHBBH4s4s", ip_vhl, 0, total, 0x1234, frag, 64, proto, 0, src_ip, dst_ip)
    ip += options
    if ip_ck is None:
        ip_ck = csum(ip)
    ip = ip[:10] + struct.pack("!H", ip_ck) + ip[12:]
    return dst_mac + src_mac + struct.pack("!H", ethertype) + ip + u + body + pad


def arp(op, sha, spa, tha, tpa, *, eth_dst=None, htype=1, ptype=0x0800, hlen=6, plen=4):
    a = struct.pack("!HHBBH", htype, ptype, hlen, plen, op) + sha + spa + tha + tpa
    f = (eth_dst or BCAST) + sha + b"\x08\x06" + a
    return f + b"\0" * max(0, 60 - len(f))


def decoder_corpus():
    good = frame()
    c = {
        "data--golden": good,
        "data--empty-payload": frame(b""),
        "data--odd-payload": frame(b"abc"),
        "data--no-cq-data": frame(flags=0, cq_data=0),
        "data--ip-options": frame(options=b"\x01\x01\x01\x00", ip_vhl=0x46),
        "data--udp-checksum-zero": frame(udp_ck=0),
        "data--ethernet-padding": frame(b"", pad=b"\0" * 6),
        "data--df-clear": frame(frag=0),
        "data--1400-bytes": frame(bytes(range(256)) * 5 + bytes(120)),
        "arp--request": arp(1, MAC1, IP1, b"\0" * 6, IP2),
        "eth-truncated--empty": b"",
        "eth-truncated--13-bytes": good[:13],
        "vlan--8100": frame(ethertype=0x8100),
        "vlan--88a8": frame(ethertype=0x88A8),
        "ethertype--ipv6": frame(ethertype=0x86DD),
        "ip-truncated--33-bytes": good[:33],
        "ip-version--6": frame(ip_vhl=0x65),
        "ip-header-length--ihl4": frame(ip_vhl=0x44),
        "ip-checksum--flipped": frame(ip_ck=0x1234),
        "ip-total-length--beyond-frame": frame(ip_total=len(good) - 14 + 1),
        "ip-total-length--too-short": frame(ip_total=20 + 8 + 20 - 1),
        "ip-total-length--truncated-frame": good[:-1],
        "ip-fragment--more-fragments": frame(frag=0x2000),
        "ip-fragment--offset": frame(frag=0x0001),
        "ip-protocol--tcp": frame(proto=6),
        "udp-length--long": frame(udp_len=8 + 20 + 13, udp_ck=0),
        "udp-length--short": frame(udp_len=8 + 20 + 11, udp_ck=0),
        "udp-checksum--wrong": frame(udp_ck=0x1234),
        "header-version--0": frame(version=0),
        "header-version--3": frame(version=3),
        # Wire version 1 (format.h): an older dpfab's frames of each type, refused and counted.
        "old-version--v1-dgram": frame(version=1, v1=True),
        "old-version--v1-dgram-no-udp-checksum": frame(version=1, v1=True, udp_ck=0),
        "old-version--v1-dgram-empty": frame(b"", version=1, v1=True, flags=0, cq_data=0),
        "old-version--v1-rdm": frame(rdm(version=1)[20:], version=1, v1=True, typ=7, flags=0,
                                     cq_data=0),
        "old-version--v1-cm": frame(cm()[20:], version=1, v1=True, typ=8, flags=0, cq_data=0),
        # A 1 in the version byte of what is no version-1 frame: an unknown version.
        "header-version--1-in-a-v2-frame": frame(version=1),
        "header-version--v1-payload-length-wrong": frame(version=1, v1=True, plen=13),
        "header-version--v1-unknown-type": frame(version=1, v1=True, typ=2),
        "header-version--v1-too-short": frame(b"hello", version=1, flags=0, cq_data=0),
        "header-type--2-reserved-in-v1": frame(typ=2),
        "header-type--6-reserved-in-v1": frame(typ=6),
        "header-type--9": frame(typ=9),
        "data--rdm-type": frame(typ=7, flags=0, cq_data=0),
        "data--cm-type": frame(typ=8, flags=0, cq_data=0),
        "header-type--zero": frame(typ=0),
        "header-flags--unknown-bit": frame(flags=0x8000),
        "payload-length--plus-one": frame(plen=13),
        "payload-length--minus-one": frame(plen=11),
        "data--multicast-group": frame(dst_ip=GROUP, dst_mac=GROUP_MAC),
        "data--multicast-group-sharing-the-mac": frame(dst_ip=bytes([239, 129, 2, 3]),
                                                        dst_mac=GROUP_MAC),
        "ip-destination--group-to-unicast-mac": frame(dst_ip=GROUP),
        "ip-destination--group-to-other-group-mac": frame(dst_ip=bytes([239, 1, 2, 4]),
                                                           dst_mac=GROUP_MAC),
        "ip-destination--unicast-in-group-frame": frame(dst_mac=GROUP_MAC),
        "ip-destination--unicast-in-broadcast-frame": frame(dst_mac=BCAST),
        "ip-destination--limited-broadcast": frame(dst_ip=b"\xff" * 4, dst_mac=BCAST),
        "ip-source--multicast-ip": frame(src_ip=GROUP),
        "ip-source--broadcast-ip": frame(src_ip=b"\xff" * 4),
        "ip-source--group-mac": frame(src_mac=GROUP_MAC),
    }
    return c


# ARP target records (see arp_fuzz.cc): op | (clock steps << 2), then the operation's bytes.
def rec_frame(f, steps=0):
    assert len(f) < 256
    return bytes([0 | (steps << 2), len(f)]) + f


def rec_resolve(ip, steps=0):
    return bytes([1 | (steps << 2)]) + ip


def rec_tick(steps=0):
    return bytes([2 | (steps << 2)])


def rec_learn(ip, mac, create, steps=0):
    return bytes([3 | (steps << 2)]) + ip + mac + bytes([create])


def arp_corpus():
    req_for_us = arp(1, MAC1, IP1, b"\0" * 6, IP2)
    reply_to_us = arp(2, MAC3, IP3, MAC2, IP2, eth_dst=MAC2)
    resolve3 = rec_resolve(IP3) + rec_tick()
    c = {
        "request--for-us": rec_frame(req_for_us),
        "request--for-someone-else": rec_frame(arp(1, MAC1, IP1, b"\0" * 6, IP3)),
        "reply--completes-our-resolution": resolve3 + rec_frame(reply_to_us, 5) + rec_tick(63),
        "reply--unsolicited-for-someone-else": rec_frame(arp(2, MAC3, IP3, MAC1, IP1)),
        "request--gratuitous-from-known-peer": rec_learn(IP3, MAC1, 1)
        + rec_frame(arp(1, MAC3, IP3, b"\0" * 6, IP3), 1),
        "request--probe": rec_frame(arp(1, MAC1, b"\0" * 4, b"\0" * 6, IP2)),
        "request--conflict-claims-our-address": rec_frame(arp(1, MAC3, IP2, b"\0" * 6, IP1)),
        "request--fills-the-table": b"".join(
            rec_frame(arp(1, bytes([2, 0, 0, 0, 1, i]), bytes([10, 0, 1, i]), b"\0" * 6, IP2))
            for i in range(1, 11)),
        "request--refresh-then-answer": rec_learn(IP3, MAC3, 1) + rec_tick(63) * 5
        + rec_frame(arp(1, MAC3, IP3, b"\0" * 6, IP2)),
        "truncated--27-bytes": rec_frame(req_for_us[:14 + 27]),
        "hardware-type--ieee802": rec_frame(arp(1, MAC1, IP1, b"\0" * 6, IP2, htype=6)),
        "protocol-type--ipv6": rec_frame(arp(1, MAC1, IP1, b"\0" * 6, IP2, ptype=0x86DD)),
        "address-length--hlen8": rec_frame(arp(1, MAC1, IP1, b"\0" * 6, IP2, hlen=8)),
        "opcode--rarp": rec_frame(arp(3, MAC1, IP1, b"\0" * 6, IP2)),
        "sender--broadcast-mac": rec_frame(arp(1, BCAST, IP1, b"\0" * 6, IP2)),
        "sender--multicast-ip": rec_frame(arp(1, MAC1, bytes([224, 0, 0, 1]), b"\0" * 6, IP2)),
        "decoder-data--not-arp": rec_frame(frame()),
        # Resolution that nobody answers: three requests, failed, forgotten, resolved again.
        "none--unanswered-resolution": rec_resolve(IP3) + rec_tick()
        + rec_tick(29) * 4 + rec_tick(63) * 2 + rec_resolve(IP3) + rec_tick(),
        "none--full-mailbox": b"".join(rec_resolve(bytes([10, 1, i // 256, i % 256]))
                                       for i in range(70)) + rec_tick() + rec_tick(),
        "none--learn-and-expire": rec_learn(IP1, MAC1, 1) + rec_learn(IP3, MAC3, 0)
        + rec_tick(63) * 8,
    }
    return c


def outer(typ, flags, payload_len, cq_data):
    """A dpfab header of wire version 2 (format.h, 20 bytes): src_ep 3, dst_ep 7."""
    return struct.pack("!BBHHHIQ", 2, typ, flags, 3, 7, payload_len, cq_data)


def rdm(kind=1, flags=3, epoch=7, seq=5, ack=9, sack=6, window=64, reserved=0, msg_id=11,
        offset=0, length=12, tag=0x1234, cq_data=0x55, data=b"hello dpfab!", version=2, body=True,
        outer_type=7, outer_flags=0, outer_cq_data=0, rma=None):
    """One rdm fuzz input: the 20-byte dpfab header, then the RDM header (rdm.h), its RMA extension
    when `rma` = (key, addr, atomic_op, datatype, reserved, status), and data."""
    r = struct.pack("!BBHIIIQHHI", version, kind, flags, epoch, seq, ack, sack, window, reserved,
                    msg_id)
    if body:
        r += struct.pack("!QQQQ", offset, length, tag, cq_data)
    if rma is not None:
        r += struct.pack("!QQBBHI", *rma)
    r += data
    return outer(outer_type, outer_flags, len(r), outer_cq_data) + r


def rdm_corpus():
    ack = dict(kind=2, flags=0, seq=0, msg_id=0, body=False, data=b"")
    return {
        "ok--eager-tagged": rdm(),
        "ok--eager-middle-segment": rdm(flags=0, tag=0, cq_data=0, offset=100, length=112),
        "ok--eager-empty": rdm(length=0, data=b""),
        "ok--ack": rdm(**ack),
        "ok--ack-rnr": rdm(**{**ack, "flags": 4}),
        "ok--ack-request": rdm(**{**ack, "flags": 8}),
        "ok--ack-request-on-eager": rdm(flags=8 | 3),
        "ok--ack-request-on-rdv-data": rdm(kind=5, flags=8, tag=0, cq_data=0, offset=4096,
                                           length=1 << 20),
        "flags--ack-request-on-rts": rdm(kind=3, flags=8 | 3, length=1 << 30, data=b""),
        "ok--rts": rdm(kind=3, length=1 << 30, data=b""),
        "ok--rts-by-reference": rdm(kind=3, flags=0x80 | 3, offset=0x7f0012345000,
                                    length=1 << 16, data=b""),
        "range--rts-by-reference-at-0": rdm(kind=3, flags=0x80, tag=0, cq_data=0, offset=0,
                                            length=1 << 16, data=b""),
        "flags--reference-on-cts": rdm(kind=4, flags=0x80, tag=0, cq_data=0, offset=0x1000,
                                       length=1 << 16, data=b""),
        "ok--cts": rdm(kind=4, flags=0, tag=0, cq_data=0, length=1 << 20, data=b""),
        "ok--rdv-data": rdm(kind=5, flags=0, tag=0, cq_data=0, offset=4096, length=1 << 20),
        "outer-header--type-data": rdm(outer_type=1),
        "outer-header--type-cm": rdm(outer_type=8),
        "outer-header--flags": rdm(outer_flags=1),
        "outer-header--cq-data": rdm(outer_cq_data=1),
        "truncated--common": rdm()[:20 + 20],
        "truncated--body": rdm()[:20 + 40],
        "version--1": rdm(version=1),  # an older dpfab's (its eager limit was 16 KiB)
        "version--3": rdm(version=3),
        "kind--0": rdm(kind=0),
        "kind--11": rdm(kind=11),
        "flags--rnr-on-eager": rdm(flags=7),
        "epoch--zero": rdm(epoch=0),
        "reserved--set": rdm(reserved=1),
        "ack-fields--seq": rdm(**{**ack, "seq": 1}),
        "data-length--ack-with-data": rdm(**{**ack, "data": b"x"}),
        "data-length--empty-segment": rdm(data=b""),
        "length--huge": rdm(length=1 << 41),
        "range--beyond-message": rdm(offset=1, length=12),
        "range--offset-wraps": rdm(offset=(1 << 64) - 4, length=12),
        "range--rts-offset": rdm(kind=3, offset=1, length=100, data=b""),
        "tag-field--untagged": rdm(flags=1),
        "cq-data-field--no-flag": rdm(flags=2),
        # The RMA kinds (kWrite 6, kReadReq 7, kReadResp 8, kAtomic 9, kRmaResp 10).
        "ok--write-segment": rdm(kind=6, flags=0x11, tag=0, offset=4, length=16,
                                 rma=(0x1234, 0x1000, 0, 0, 0, 0)),
        "ok--write-empty": rdm(kind=6, flags=0, tag=0, cq_data=0, length=0, data=b"",
                               rma=(1, 2, 0, 0, 0, 0)),
        "ok--read-request": rdm(kind=7, flags=0, tag=0, cq_data=0, length=1 << 20, data=b"",
                                rma=(0x1234, 0x1000, 0, 0, 0, 0)),
        "ok--read-response": rdm(kind=8, flags=8, tag=0, cq_data=0, offset=8, length=20),
        "ok--atomic-fetch-add": rdm(kind=9, flags=0x20, tag=0, cq_data=0, length=8,
                                    data=struct.pack("<Q", 1), rma=(5, 64, 2, 7, 0, 0)),
        "ok--atomic-compare": rdm(kind=9, flags=0x40, tag=0, cq_data=0, length=16,
                                  data=bytes(16), rma=(5, 64, 12, 7, 0, 0)),
        "ok--response-error": rdm(kind=10, flags=0, tag=0, cq_data=0, length=0, data=b"",
                                  rma=(0, 0, 0, 0, 0, 13)),
        "ok--response-fetched": rdm(kind=10, flags=0, tag=0, cq_data=0, length=8, data=bytes(8),
                                    rma=(0, 0, 0, 0, 0, 0)),
        "truncated--rma-extension": rdm(kind=6, flags=0, tag=0, cq_data=0, data=b"",
                                        length=0, rma=(1, 2, 0, 0, 0, 0))[:20 + 80],
        "flags--tagged-write": rdm(kind=6, flags=2, length=12, rma=(1, 2, 0, 0, 0, 0)),
        "flags--ack-request-on-read-request": rdm(kind=7, flags=8, tag=0, cq_data=0, data=b"",
                                                  length=4, rma=(1, 2, 0, 0, 0, 0)),
        "reserved--rma-extension": rdm(kind=6, flags=0, tag=0, cq_data=0,
                                       rma=(1, 2, 0, 0, 1, 0)),
        "rma-fields--op-on-write": rdm(kind=6, flags=0, tag=0, cq_data=0, rma=(1, 2, 3, 0, 0, 0)),
        "rma-fields--atomic-op-19": rdm(kind=9, flags=0, tag=0, cq_data=0, length=8,
                                        data=bytes(8), rma=(1, 2, 19, 7, 0, 0)),
        "rma-fields--datatype-16": rdm(kind=9, flags=0, tag=0, cq_data=0, length=8,
                                       data=bytes(8), rma=(1, 2, 2, 16, 0, 0)),
        "rma-fields--fetch-and-compare": rdm(kind=9, flags=0x60, tag=0, cq_data=0, length=8,
                                             data=bytes(8), rma=(1, 2, 2, 7, 0, 0)),
        "rma-fields--status-on-write": rdm(kind=6, flags=0, tag=0, cq_data=0,
                                           rma=(1, 2, 0, 0, 0, 5)),
        "rma-fields--key-on-response": rdm(kind=10, flags=0, tag=0, cq_data=0, length=0,
                                           data=b"", rma=(1, 0, 0, 0, 0, 0)),
        "range--atomic-partial": rdm(kind=9, flags=0, tag=0, cq_data=0, length=16, data=bytes(8),
                                     rma=(1, 2, 2, 7, 0, 0)),
        "data-length--atomic-empty": rdm(kind=9, flags=0, tag=0, cq_data=0, length=0, data=b"",
                                         rma=(1, 2, 2, 7, 0, 0)),
        "data-length--read-request-with-data": rdm(kind=7, flags=0, tag=0, cq_data=0,
                                                   length=12, rma=(1, 2, 0, 0, 0, 0)),
    }


def cm(kind=1, flags=0, src_id=0x1234, dst_id=0, data_len=None, reserved=0, data=b"hello",
       version=1, outer_type=8, outer_flags=0, outer_cq_data=0):
    """One cm fuzz input: the 20-byte dpfab header, then the CM header (cm.h) and data."""
    r = struct.pack("!BBHIIHH", version, kind, flags, src_id, dst_id,
                    len(data) if data_len is None else data_len, reserved) + data
    return outer(outer_type, outer_flags, len(r), outer_cq_data) + r


def cm_corpus():
    conn = dict(src_id=0x1234, dst_id=0x5678, data=b"")
    return {
        "ok--connreq": cm(),
        "ok--connreq-no-data": cm(data=b""),
        "ok--connreq-256-bytes": cm(data=bytes(range(256))),
        "ok--accept": cm(kind=2, dst_id=0x1234, src_id=0x5678, data=b"accepted"),
        "ok--reject": cm(kind=3, src_id=0, dst_id=0x1234, data=b"no thanks"),
        "ok--reject-no-listener": cm(kind=3, flags=1, src_id=0, dst_id=0x1234, data=b""),
        "ok--established": cm(kind=4, **conn),
        "ok--shutdown": cm(kind=5, **conn),
        "ok--shutdown-ack": cm(kind=6, **conn),
        "ok--keepalive": cm(kind=7, **conn),
        "outer-header--type-rdm": cm(outer_type=7),
        "outer-header--type-data": cm(outer_type=1),
        "outer-header--cq-data": cm(outer_cq_data=1),
        "outer-header--flags": cm(outer_flags=1),
        "truncated--15-bytes": cm(data=b"")[:20 + 15],
        "version--2": cm(version=2),
        "kind--0": cm(kind=0),
        "kind--8": cm(kind=8),
        "flags--no-listener-on-connreq": cm(flags=1),
        "flags--unknown-bit": cm(kind=3, flags=2, src_id=0, dst_id=0x1234),
        "ids--connreq-without-source": cm(src_id=0),
        "ids--connreq-with-destination": cm(dst_id=1),
        "ids--reject-with-source": cm(kind=3, src_id=1, dst_id=0x1234),
        "ids--accept-without-destination": cm(kind=2, dst_id=0),
        "ids--keepalive-without-destination": cm(kind=7, src_id=1, dst_id=0, data=b""),
        "reserved--set": cm(reserved=1),
        "data-length--longer-than-payload": cm(data_len=6),
        "data-length--shorter-than-payload": cm(data_len=4),
        "data-length--257-bytes": cm(data=bytes(257)),
        "data-length--data-on-shutdown": cm(kind=5, src_id=1, dst_id=2, data=b"x"),
    }


def core_recv(flags=0, len16=0, tag=0, ignore=0, src=3):
    return struct.pack("!BBHBBB", 1, flags, len16, tag, ignore, src)


def core_send(dest=0, length=100, tag=0, bits=0):
    return struct.pack("!BB", 2, dest) + length.to_bytes(3, "big") + struct.pack("!BB", tag, bits)


def core_time(us=100):
    return struct.pack("!BH", 3, us)


def core_frame(payload, peer=0):
    return struct.pack("!BBH", 0, peer, len(payload)) + payload


def core_rdm(**kw):
    """An RDM payload (no dpfab header) from the fuzzed peer, epoch 7, nothing of ours acked."""
    kw.setdefault("ack", 0)
    kw.setdefault("sack", 0)
    return rdm(**kw)[20:]


def rdm_core_corpus():
    """Scripts for the rdm-core target (rdm_core_fuzz.cc): one command byte, then arguments."""
    eager = dict(kind=1, flags=0, tag=0, cq_data=0)
    return {
        "none--sends-then-silence": core_send(0, 100) + core_send(0, 10000) + core_send(1, 0)
        + core_time() + core_time(1000),
        "none--eager-from-peer-matches": core_recv(0, 7) + core_frame(core_rdm(**eager, seq=0))
        + core_time(),
        "none--eager-segments-reassembled": core_recv(0, 100)
        + core_frame(core_rdm(**eager, seq=0, offset=0, length=24))
        + core_frame(core_rdm(**eager, seq=1, offset=12, length=24)) + core_time(),
        "none--out-of-order-and-duplicate": core_recv(0, 7)
        + core_frame(core_rdm(**eager, seq=1, msg_id=2))
        + core_frame(core_rdm(**eager, seq=0)) + core_frame(core_rdm(**eager, seq=0))
        + core_time(),
        "none--rts-unexpected-peek-claim": core_frame(core_rdm(kind=3, flags=2, tag=5,
                                                               length=100000, data=b""))
        + core_recv(1 | 2 | 4, 0, 5) + core_recv(1 | 4 | 32, 4096) + core_time()
        + core_frame(core_rdm(kind=5, flags=0, tag=0, cq_data=0, seq=1, offset=0, length=100000))
        + core_time(500),
        "none--ack-with-zero-window": core_frame(core_rdm(kind=2, flags=0, seq=0, msg_id=0,
                                                          body=False, data=b"", window=0))
        + core_send(0, 100) + core_time(),
        "none--cts-for-unknown-message": core_frame(core_rdm(kind=4, flags=0, tag=0, cq_data=0,
                                                             msg_id=99, length=10, data=b""))
        + core_time(),
        "none--rnr-then-silence": core_send(0, 100)
        + core_frame(core_rdm(kind=2, flags=4, seq=0, msg_id=0, body=False, data=b""))
        + core_time(50),
        # Peer 0 reads us and we it (rdm_core_fuzz.cc): an RTS by reference (kRdmRef, 0x80)
        # inside its stand-in memory, one outside it, and a send of ours that goes by reference.
        "none--rts-by-reference": core_recv(0, 8000)
        + core_frame(core_rdm(kind=3, flags=0x80, tag=0, cq_data=0, offset=0x10000,
                              length=5000, data=b""))
        + core_frame(core_rdm(kind=3, flags=0x80, tag=0, cq_data=0, seq=6, msg_id=12,
                              offset=0x5, length=6000, data=b""))
        + core_recv(0, 3000) + core_send(0, 10000) + core_time(),
        "none--multi-recv": core_recv(16, 64) + core_frame(core_rdm(**eager, seq=0))
        + core_frame(core_rdm(**eager, seq=1, msg_id=2)) + core_time() + struct.pack("!BB", 4, 0),
    }


def shm_ring_corpus():
    # head (first pass), head (second pass), then the ring's data area (4 KiB).
    def rec(kind, payload, flags=0, ln=None):
        n = len(payload) if ln is None else ln
        hdr = struct.pack("<IBBHHHHH", n, kind, flags, 1, 2, 3, 4, 0)
        body = hdr + payload
        return body + b"\0" * (-len(body) % 64)
    two = rec(3, b"rdm packet") + rec(2, b"frame" * 20)
    pad_then = rec(3, b"x" * 40)
    return {
        "empty--nothing-written": struct.pack("<QQ", 0, 0),
        "record--two-records": struct.pack("<QQ", len(two), len(two)) + two,
        "record--one-then-one-more": struct.pack("<QQ", 64, 128) + rec(3, b"a") + rec(3, b"b"),
        "corrupt--head-beyond-ring": struct.pack("<QQ", 8192 + 64, 0) + rec(3, b"a"),
        "corrupt--head-misaligned": struct.pack("<QQ", 17, 0) + rec(3, b"a"),
        "corrupt--length-beyond-head": struct.pack("<QQ", 64, 64) + rec(3, b"a", ln=100),
        "corrupt--kind-unknown": struct.pack("<QQ", 64, 64) + rec(9, b"a"),
        "corrupt--flags-set": struct.pack("<QQ", 64, 64) + rec(3, b"a", flags=1),
        "corrupt--pad-not-at-end": struct.pack("<QQ", 64, 64) + rec(1, b"a"),
        "record--head-goes-back": struct.pack("<QQ", 64, 0) + pad_then[:64],
    }


def shm_hello_corpus():
    def hello(kind=b"dpfabSH1", version=1, status=0, node=7, nonce=0xdeadbeef, to_node=3,
              ring=131072, seg=None, reserved=b"\0" * 40, pad=0):
        seg = 4096 + 2 * (4096 + ring) if seg is None else seg
        return (kind + struct.pack("<IIQIIIIII", version, status, 0x0123456789abcdef, node, nonce,
                                   to_node, 0x1234, ring, 0x0100007f)
                + bytes([2, 0x64, 0x70, 1, 2, 3]) + struct.pack("<HQ", pad, 0x7fff0000)
                + bytes(range(16)) + struct.pack("<Q", seg) + reserved)
    ack = dict(kind=b"dpfabSA1", ring=0, seg=0)
    return {
        "ok--hello": hello(),
        "ok--ack": hello(**ack),
        "ok--ack-yield": hello(**ack, status=3),
        "length--short": hello()[:100],
        "magic--wrong": hello(kind=b"dpfabXX1"),
        "version--2": hello(version=2),
        "status--on-a-hello": hello(status=1),
        "status--unknown": hello(**ack, status=4),
        "node--zero": hello(node=0),
        "node--nonce-zero": hello(nonce=0),
        "ring--not-power-of-two": hello(ring=100000),
        "ring--segment-mismatch": hello(seg=4096),
        "ring--ack-with-ring": hello(kind=b"dpfabSA1"),
        "reserved--pad": hello(pad=1),
        "reserved--tail": hello(reserved=b"\1" + b"\0" * 39),
    }


def address_corpus():
    # The first byte picks the reader: even = binary (read_address), odd = string (parse_address).
    mac = bytes([2, 0, 0, 0, 0, 7])
    short = bytes([1, 0]) + mac + bytes([10, 0, 0, 1]) + struct.pack(">HH", 9228, 3)
    host = struct.pack(">QII", 0x0123456789ABCDEF, 5, 0x1A2B3C4D)
    native = bytes([3, 0]) + short[2:] + host
    sin = struct.pack("<H", 2) + struct.pack(">H", 9228) + bytes([10, 0, 0, 1]) + bytes(8)
    return {
        "short--v1": b"\0" + short,
        "native--v3-with-host": b"\0" + native,
        "native--v3-without-host": b"\0" + bytes([3, 0]) + short[2:] + bytes(16),
        "short--v1-longer-buffer": b"\0" + short + host,
        "sockaddr_in--af-inet": b"\0" + sin,
        "refused--v3-truncated": b"\0" + native[:20],
        "refused--too-short": b"\0" + short[:15],
        "refused--unknown-version": b"\0" + bytes([4, 0]) + short[2:] + host,
        "refused--v3-reserved-set": b"\0" + bytes([3, 1]) + native[2:],
        "native--string": b"\1fi_dpdk://02:00:00:00:00:07/10.0.0.1:9228/3",
        "native--string-with-host": b"\1fi_dpdk://02:00:00:00:00:07/10.0.0.1:9228/3"
                                    b"/shm:0123456789abcdef:5:1a2b3c4d",
        "sockaddr_in--string": b"\1fi_sockaddr_in://10.0.0.1:9228",
        "refused--string-host-zero": b"\1fi_dpdk://02:00:00:00:00:07/10.0.0.1:9228/3"
                                     b"/shm:0000000000000000:5:1a2b3c4d",
        "refused--string-node-zero": b"\1fi_dpdk://02:00:00:00:00:07/10.0.0.1:9228/3"
                                     b"/shm:0123456789abcdef:0:1a2b3c4d",
        "refused--string-trailing": b"\1fi_dpdk://02:00:00:00:00:07/10.0.0.1:9228/3/x",
        "refused--string-port-too-big": b"\1fi_dpdk://02:00:00:00:00:07/10.0.0.1:70000/3",
        "refused--string-nul-inside": b"\1fi_dpdk://02:00:00:00:00:07/10.0.0.1:9228/3\0/shm:1:1:1",
    }


def rma_frame(kind, seq, key_region=None, addr_region=None, off=16, flags=0, msg_id=1,
              offset=0, length=0, data=b"", atomic_op=0, datatype=0, cq_data=0, peer=0):
    """An RMA frame from a peer of the rma target (rma_fuzz.cc): `key_region`/`addr_region` name a
    region of the script (the target substitutes its key and its address + off - 16)."""
    key = (key_region << 56 | 0xee << 48) if key_region is not None else 0x12345
    addr = (addr_region << 56 | 0xee << 48 | off) if addr_region is not None else 0x999
    payload = rdm(kind=kind, flags=flags, seq=seq, ack=0, sack=0, msg_id=msg_id, offset=offset,
                  length=length, tag=0, cq_data=cq_data, data=data,
                  rma=(key, addr, atomic_op, datatype, 0, 0))[20:]
    return struct.pack("!BBH", 0, peer, len(payload)) + payload


def rma_region(size=256, access=3):
    return struct.pack("!BHB", 1, size, access)


def rma_corpus():
    """Scripts for the rma target (rma_fuzz.cc): one command byte, then arguments."""
    t = core_time(100)
    return {
        "none--write-read-atomic": rma_region() + rma_frame(6, 0, 0, 0, 16, length=8, data=bytes(8))
        + rma_frame(7, 1, 0, 0, 16, msg_id=2, length=64) + t
        + rma_frame(9, 2, 0, 0, 24, flags=0x20, msg_id=3, length=8, data=struct.pack("<Q", 5),
                    atomic_op=2, datatype=7) + t + core_time(2000),
        "none--write-past-the-end": rma_region(64) + rma_frame(6, 0, 0, 0, 16 + 60, length=8,
                                                                data=bytes(8)) + t,
        "none--write-to-read-only": rma_region(64, 1) + rma_frame(6, 0, 0, 0, 16, length=8,
                                                                   data=b"abcdefgh") + t,
        "none--closed-region": rma_region(64) + struct.pack("!BB", 2, 0)
        + rma_frame(6, 0, 0, 0, 16, length=8, data=bytes(8)) + t,
        "none--large-read-then-write": rma_region(4000) + rma_frame(7, 0, 0, 0, 16, length=4000)
        + rma_frame(6, 1, 0, 0, 16, msg_id=2, length=8, data=bytes(8)) + t + core_time(5000),
        "none--our-ops-then-silence": rma_region() + struct.pack("!BBBHHB", 4, 0, 0, 0, 100, 0)
        + struct.pack("!BBBHHB", 4, 1, 0, 0, 5000, 1) + struct.pack("!BBBHHB", 4, 2, 0, 0, 8, 0)
        + t + core_time(3000),
    }


def write(target, corpus):
    d = os.path.join(HERE, "corpus", target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in corpus.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print(f"{target}: {len(corpus)} seeds")


if __name__ == "__main__":
    write("decoder", decoder_corpus())
    write("arp", arp_corpus())
    write("rdm", rdm_corpus())
    write("rdm-core", rdm_core_corpus())
    write("cm", cm_corpus())
    write("shm-ring", shm_ring_corpus())
    write("shm-hello", shm_hello_corpus())
    write("address", address_corpus())
    write("rma", rma_corpus())
