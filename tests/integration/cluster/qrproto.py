"""Minimal client side of qrstore's client protocol (cluster/port/protocol.h), for the cluster
integration tests that need to send what the C++ client never would: random bytes, broken
frames, unknown types and ops. Only what those tests use."""
import socket
import struct

KIND_READ, KIND_UPDATE = 0, 1
T_TXN_REQUEST, T_TXN_REPLY, T_ERROR, T_NOT_LEADER, T_STATUS_REQUEST, T_STATUS_REPLY = 1, 2, 3, 4, 5, 6
T_OPEN_SESSION, T_SESSION_OPENED = 8, 9
# Result codes (cluster/port/protocol.h ResultCode); the ones that carry a detail string.
COMMITTED, ABORTED_LOGIC, REJECTED, FAILED, COMMITTED_NO_VALUES, EXPIRED = 0, 1, 3, 4, 5, 6
DETAIL_CODES = (REJECTED, FAILED, EXPIRED)


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def frame(msg_type, body, version=1):
    return b"QR" + bytes([version, msg_type]) + struct.pack("<I", len(body)) + body


def txn_request(request_id, txns, session=0, seqs=None):
    """txns: [(txn_id, [(kind, key, src_key, arg), ...]), ...]; with a session, seqs[i] is txn
    i's sequence number (increasing)."""
    b = struct.pack("<Q", request_id) + varint(session) + varint(len(txns))
    prev = 0
    for i, (tid, ops) in enumerate(txns):
        if session:
            b += varint(seqs[i] - prev)
            prev = seqs[i]
        b += struct.pack("<Q", tid) + varint(len(ops))
        for kind, key, src, arg in ops:
            b += bytes([kind]) + varint(key) + varint(src) + varint(arg)
    return b


class Reader:
    def __init__(self, data):
        self.d, self.i = data, 0

    def u8(self):
        self.i += 1
        return self.d[self.i - 1]

    def u64(self):
        self.i += 8
        return struct.unpack("<Q", self.d[self.i - 8:self.i])[0]

    def varint(self):
        v, shift = 0, 0
        while True:
            b = self.u8()
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    def string(self):
        n = self.varint()
        self.i += n
        return self.d[self.i - n:self.i].decode()


def parse_reply(body, positions=False):
    """-> (request_id, [(code, detail_or_None)]); with positions, each result is
    (code, detail_or_None, (batch, planner, index) or None, read values bytes)."""
    r = Reader(body)
    rid, rec, n = r.u64(), r.varint(), r.varint()
    out = []
    for _ in range(n):
        code = r.u8()
        if code in DETAIL_CODES:
            d = r.string()
            out.append((code, d, None, b"") if positions else (code, d))
        else:
            pos = (r.varint(), r.varint(), r.varint())
            reads = r.varint()
            values = r.d[r.i:r.i + reads * rec]
            r.i += reads * rec
            out.append((code, None, pos, values) if positions else (code, None))
    return rid, out


def open_session(conn, request_id=1):
    """Opens a session on `conn` (the leader); -> its id."""
    conn.send(frame(T_OPEN_SESSION, struct.pack("<Q", request_id)))
    f = conn.read_frame()
    if f is None or f[0] != T_SESSION_OPENED:
        raise AssertionError("open-session: got %r" % (f,))
    r = Reader(f[1])
    assert r.u64() == request_id
    return r.varint()


def parse_error(body):
    r = Reader(body)
    return r.u64(), r.u8(), r.string()


def parse_status(body):
    """The leading fields of a NodeStatus: request id, node, role, state, error."""
    r = Reader(body)
    return {"request_id": r.u64(), "node": r.string(), "role": r.string(), "state": r.string(), "error": r.string()}


class Conn:
    def __init__(self, port, timeout=30):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def send(self, data):
        self.s.sendall(data)

    def read_frame(self):
        """-> (type, body), or None when the server closed the connection."""
        h = self._read(8)
        if h is None:
            return None
        n = struct.unpack("<I", h[4:])[0]
        body = self._read(n)
        return None if body is None else (h[3], body)

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            c = self.s.recv(n - len(buf))
            if not c:
                return None
            buf += c
        return buf

    def close(self):
        self.s.close()


def status(port):
    c = Conn(port, timeout=10)
    c.send(frame(T_STATUS_REQUEST, struct.pack("<Q", 1)))
    f = c.read_frame()
    c.close()
    assert f is not None and f[0] == T_STATUS_REPLY, f
    return parse_status(f[1])
