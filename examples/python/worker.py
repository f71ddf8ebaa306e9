"""A worker's full cycle over gRPC: initialize a rank, allocate pages, write
them (here: nothing), confirm, look the keys up, then show how a failed
confirmation reads: FAILED_PRECONDITION with its ErrorInfo.

    /usr/bin/python3 examples/python/worker.py --server 127.0.0.1:18000
"""

import argparse
import hashlib
import sys

import grpc

from hf3fs_metadata_client import MetadataClient, MetadataError


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:18000", help="host:port of the metadata server, or of a cluster's members, comma-separated")
    parser.add_argument("--namespace", default="python-worker")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--token-file", help="file whose first line is the token (default: env HF3FS_METADATA_TOKEN)")
    parser.add_argument("--ca-file", help="PEM CA to trust: connect over TLS")
    parser.add_argument("--cert-file", help="PEM client certificate (mTLS), with --key-file")
    parser.add_argument("--key-file", help="PEM key of --cert-file")
    parser.add_argument("--retry-seconds", type=float, default=30.0, help="how long a call retries an unavailable server")
    args = parser.parse_args()

    token = None
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = next(line.strip() for line in f if line.strip() and not line.startswith("#"))
    def read(path):
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    client = MetadataClient(
        args.server,
        token=token,
        root_certificates=read(args.ca_file),
        private_key=read(args.key_file),
        certificate_chain=read(args.cert_file),
        retry_seconds=args.retry_seconds,
    )
    init = client.initialize_rank(args.rank, num_pages=1024, world_size=1, namespace=args.namespace)
    print(f"initialized rank {args.rank}: created={init.created} free_pages={init.free_pages} server_id={init.server_id}")

    keys = [hashlib.sha256(f"block-{i}".encode()).hexdigest() for i in range(4)]
    allocated = client.batch_allocate(args.rank, keys, namespace=args.namespace)
    pages = list(allocated.pages)
    print(f"allocated {len(keys)} keys: pages {pages}")

    # ... the worker writes each key's KV data to its page of the rank's 3FS file here ...

    confirmed = client.confirm_write(args.rank, keys, pages, namespace=args.namespace)
    print(f"confirmed {confirmed.confirmed} keys, {len(confirmed.completed)} complete")
    print(f"exists {list(client.batch_exists(keys + ['unknown'], namespace=args.namespace).exists)}")
    print(f"locations {list(client.get_locations(args.rank, keys, namespace=args.namespace).pages)}")

    free_page = max(pages) + 1
    try:
        client.confirm_write(args.rank, [keys[0] + "-never-reserved"], [free_page], namespace=args.namespace)
        print("unexpected: a confirmation without reservation succeeded")
        return 1
    except MetadataError as error:
        assert error.code == grpc.StatusCode.FAILED_PRECONDITION
        print(f"error {error.code.name} {error.reason} key={error.info.key} page={error.info.page} rank={error.info.rank}")
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except MetadataError as error:
        print(f"worker.py: {error}", file=sys.stderr)  # one line, no traceback: the reason is in it
        sys.exit(1)
