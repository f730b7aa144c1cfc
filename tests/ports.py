"""Free TCP ports on localhost, for the local clusters of the multi-process tests."""

import socket


def free_ports(count: int) -> list[int]:
    """`count` TCP ports on localhost that were free a moment ago (for a local cluster).

    Args:
      count: how many ports.
    """
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
