"""A small gRPC client of hf3fs.metadata.v1.MetadataService for Python workers.

It needs only grpcio and protobuf (Debian: python3-grpcio, python3-protobuf)
and the message classes that generate.sh makes from proto/ with protoc; no
gRPC code generator is needed, calls go through the channel's generic
unary_unary. Errors raise MetadataError with the server's ErrorInfo decoded
from the grpc-status-details-bin trailer, so callers branch on `reason`.
"""

import logging
import os
import random
import sys
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from google.rpc import status_pb2  # noqa: E402
from hf3fs.metadata.v1 import metadata_pb2 as pb  # noqa: E402

# Retries are announced on this logger: Python prints its warnings to stderr when the program configures no logging.
_log = logging.getLogger("hf3fs_metadata_client")

# _SAY_AFTER_SECONDS is how long a call retries before the client says it is retrying (then every 10 s).
_SAY_AFTER_SECONDS = 2.0

SERVICE = "/hf3fs.metadata.v1.MetadataService/"

# A channel with calls on it PINGs its server every 2 s and closes the connection when an answer takes 2 s: a call held by
# a server paused or cut off through a failover then fails UNAVAILABLE and goes to the next member, within its timeout.
# gRPC's default sends no PING, and such a call ended DEADLINE_EXCEEDED.
_KEEPALIVE = (("grpc.keepalive_time_ms", 2_000), ("grpc.keepalive_timeout_ms", 2_000))


class MetadataError(Exception):
    """A failed call: the gRPC code and the server's ErrorInfo."""

    def __init__(self, code, message, info):
        self.code = code
        self.info = info
        self.reason = pb.Reason.Name(info.reason) if info is not None else "REASON_UNSPECIFIED"
        self.details = message
        super().__init__(f"{code.name} {self.reason}: {message}")


class MetadataClient:
    """Calls MetadataService; `target` is host:port, or for a highly available
    cluster its members, comma-separated (host:port,host:port,...).

    A call that fails UNAVAILABLE (the server is down, restarting, or a
    standby) is retried for up to `retry_seconds`: at once on the leader that
    a standby names (REASON_NOT_LEADER), else on the next member after a
    backoff (capped exponential, full jitter). Every call of the service is
    safe to retry.

    `token` is sent on every call as `authorization: Bearer <token>` (a server
    started with --auth-token-file needs one); by default it is read from the
    environment variable HF3FS_METADATA_TOKEN. With `root_certificates` (PEM
    bytes of the CA to trust) the channels use TLS; `private_key` and
    `certificate_chain` add a client certificate (a server started with
    --tls-client-ca needs one).
    """

    def __init__(self, target, timeout_seconds=10.0, token=None, root_certificates=None, private_key=None, certificate_chain=None, retry_seconds=30.0):
        self._targets = [t.strip() for t in target.split(",") if t.strip()]
        self._credentials = None if root_certificates is None else grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
        self._channels = {}
        self._at = 0
        self._leader = None
        self._timeout = timeout_seconds
        self._retry_seconds = retry_seconds
        token = token if token is not None else os.environ.get("HF3FS_METADATA_TOKEN")
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.server_id = None

    def close(self):
        for channel in self._channels.values():
            channel.close()

    def _channel(self):
        """The channel of the member calls go to now: the named leader, else the current target."""
        target = self._leader or self._targets[self._at]
        if target not in self._channels:
            secure = self._credentials is not None
            self._channels[target] = grpc.secure_channel(target, self._credentials, _KEEPALIVE) if secure else grpc.insecure_channel(target, _KEEPALIVE)
        return self._channels[target]

    def _call(self, method, request, response_type):
        started = time.monotonic()
        say_at = started + _SAY_AFTER_SECONDS
        for attempt in range(1_000_000):
            try:
                return self._call_once(method, request, response_type)
            except MetadataError as error:
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                leader = _target_of(error.info.leader_url) if error.reason == "REASON_NOT_LEADER" else ""
                if leader and leader != self._leader and time.monotonic() - started < self._retry_seconds:
                    self._leader = leader  # a standby named the leader: go there now
                    continue
                now = time.monotonic()
                if now - started >= self._retry_seconds:
                    raise MetadataError(error.code, f"{self._target()} unavailable after {self._retry_seconds:.0f} s of retries: {error.details}{self._tls_hint(error)}", error.info) from None
                if now >= say_at:
                    say_at = now + 10.0
                    _log.warning("metadata server %s unavailable (%s)%s; retrying for up to %.0f s", self._target(), error.details, self._tls_hint(error), self._retry_seconds)
                # Backoff with jitter, but awake at the announcement and at the deadline, for a last attempt there:
                # a random wait must not skip either (the announcement was missed when a wait crossed it and the deadline).
                wait = random.random() * min(2.0, 0.05 * 2 ** min(attempt, 30))
                wake = min(now + wait, started + self._retry_seconds, say_at if say_at > now else now + wait)
                time.sleep(max(0.0, wake - now))
                if self._leader is None:
                    self._at = (self._at + 1) % len(self._targets)
                self._leader = None

    def _target(self):
        """The member calls go to now."""
        return self._leader or self._targets[self._at]

    def _tls_hint(self, error):
        """A hint at the likely cause: nothing listens there, or the port speaks TLS (it says so; an older server just closes)."""
        details = error.details or ""
        if "Connection refused" in details:
            return "; nothing listens there: is the server up, and is this its host:port?"
        if "TLS only" in details:
            return "; pass root_certificates= (worker.py: --ca-file)"
        closed = any(s in details for s in ("Socket closed", "Connection reset"))
        return "; if the server uses TLS, pass root_certificates= (worker.py: --ca-file)" if closed and self._credentials is None else ""

    def _call_once(self, method, request, response_type):
        stub = self._channel().unary_unary(
            SERVICE + method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        try:
            response, call = stub.with_call(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise MetadataError(error.code(), error.details(), _error_info(error.trailing_metadata())) from None
        for key, value in call.initial_metadata():
            if key == "hf3fs-server-id":
                self.server_id = value
        return response

    def initialize_rank(self, rank, num_pages, world_size=0, namespace=""):
        req = pb.InitializeRankRequest(namespace=namespace, rank=rank, num_pages=num_pages, world_size=world_size)
        return self._call("InitializeRank", req, pb.InitializeRankResponse)

    def batch_allocate(self, rank, keys, prefix_keys=(), namespace=""):
        req = pb.BatchAllocateRequest(namespace=namespace, rank=rank, keys=keys, prefix_keys=prefix_keys)
        return self._call("BatchAllocate", req, pb.BatchAllocateResponse)

    def confirm_write(self, rank, keys, pages, pages_to_release=(), keys_to_release=(), namespace=""):
        req = pb.ConfirmWriteRequest(namespace=namespace, rank=rank, keys=keys, pages=pages, pages_to_release=pages_to_release, keys_to_release=keys_to_release)
        return self._call("ConfirmWrite", req, pb.ConfirmWriteResponse)

    def batch_exists(self, keys, namespace=""):
        return self._call("BatchExists", pb.BatchExistsRequest(namespace=namespace, keys=keys), pb.BatchExistsResponse)

    def get_locations(self, rank, keys, namespace=""):
        req = pb.GetLocationsRequest(namespace=namespace, rank=rank, keys=keys)
        return self._call("GetLocations", req, pb.GetLocationsResponse)


def _target_of(url):
    """host:port of an advertise URL such as http://10.0.0.2:18000 ("" for "")."""
    return url.split("://", 1)[-1].rstrip("/") if url else ""


def _error_info(trailing_metadata):
    """Decodes the ErrorInfo detail of a failed call, or None."""
    for key, value in trailing_metadata or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = pb.ErrorInfo()
                if detail.Unpack(info):
                    return info
    return None
