#!/usr/bin/env python3
"""A TCP relay: LISTEN_HOST:LISTEN_PORT → TARGET_HOST:TARGET_PORT, until killed. scripts/container-test.sh
lets compose.yaml's containers (on their bridge network) reach the test PostgreSQL, which listens on
127.0.0.1 only: the relay listens on the bridge's gateway address alone. Prints the port it listens
on (LISTEN_PORT 0: a free one) as its first line.

Usage: tcp_relay.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT"""
import socket
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    host, port, target_host, target_port = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(64)
    print(server.getsockname()[1], flush=True)
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection((target_host, target_port), timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    main()
