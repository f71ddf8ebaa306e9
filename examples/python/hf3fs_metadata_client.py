"""A small gRPC client of hf3fs.metadata.v1.MetadataService for Python workers.

It needs only grpcio and protobuf (Debian: python3-grpcio, python3-protobuf)
and the message classes that generate.sh makes from proto/ with protoc; no
gRPC code generator is needed, calls go through the channel's generic
unary_unary. Errors raise MetadataError with the server's ErrorInfo decoded
from the grpc-status-details-bin trailer, so callers branch on `reason`.
"""

import os
import sys

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from google.rpc import status_pb2  # noqa: E402
from hf3fs.metadata.v1 import metadata_pb2 as pb  # noqa: E402

SERVICE = "/hf3fs.metadata.v1.MetadataService/"


class MetadataError(Exception):
    """A failed call: the gRPC code and the server's ErrorInfo."""

    def __init__(self, code, message, info):
        self.code = code
        self.info = info
        self.reason = pb.Reason.Name(info.reason) if info is not None else "REASON_UNSPECIFIED"
        super().__init__(f"{code.name} {self.reason}: {message}")


class MetadataClient:
    """Calls MetadataService over one channel; `target` is host:port.

    `token` is sent on every call as `authorization: Bearer <token>` (a server
    started with --auth-token-file needs one); by default it is read from the
    environment variable HF3FS_METADATA_TOKEN. With `root_certificates` (PEM
    bytes of the CA to trust) the channel uses TLS; `private_key` and
    `certificate_chain` add a client certificate (a server started with
    --tls-client-ca needs one).
    """

    def __init__(self, target, timeout_seconds=10.0, token=None, root_certificates=None, private_key=None, certificate_chain=None):
        if root_certificates is None:
            self._channel = grpc.insecure_channel(target)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
            self._channel = grpc.secure_channel(target, credentials)
        self._timeout = timeout_seconds
        token = token if token is not None else os.environ.get("HF3FS_METADATA_TOKEN")
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.server_id = None

    def close(self):
        self._channel.close()

    def _call(self, method, request, response_type):
        stub = self._channel.unary_unary(
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

    def confirm_write(self, rank, keys, pages, pages_to_release=(), namespace=""):
        req = pb.ConfirmWriteRequest(namespace=namespace, rank=rank, keys=keys, pages=pages, pages_to_release=pages_to_release)
        return self._call("ConfirmWrite", req, pb.ConfirmWriteResponse)

    def batch_exists(self, keys, namespace=""):
        return self._call("BatchExists", pb.BatchExistsRequest(namespace=namespace, keys=keys), pb.BatchExistsResponse)

    def get_locations(self, rank, keys, namespace=""):
        req = pb.GetLocationsRequest(namespace=namespace, rank=rank, keys=keys)
        return self._call("GetLocations", req, pb.GetLocationsResponse)


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
