"""A tiny HTTP server for tests: answers any status line it is told to,
``HTTP/1.1 70000`` included, which no real server library would send.

    python status_server.py PORT_FILE [--timeout SECONDS]

Bound to 127.0.0.1 on a free port (written to PORT_FILE). ``/s/<code>``
answers status ``<code>`` with a page linking to ``/lost/<code>``;
``/`` links to each path listed in its ``?to=`` query (comma-separated);
``/robots.txt`` is a 404; every other path is a 200 page without links.
Stops by itself after ``--timeout`` seconds.
"""

import argparse
import os
import socket
import threading
from urllib.parse import parse_qs, urlsplit


def page(links):
    body = "<html><body>" + "".join(f'<a href="{u}">{u}</a>' for u in links) + "</body></html>"
    return body.encode()


def answer(path):
    parts = urlsplit(path)
    if parts.path == "/robots.txt":
        return "404 Not Found", b""
    if parts.path.startswith("/s/"):
        code = parts.path[3:]
        return f"{code} Odd", page([f"/lost/{code}"])
    if parts.path == "/":
        to = parse_qs(parts.query).get("to", [""])[0]
        return "200 OK", page([u for u in to.split(",") if u])
    return "200 OK", page([])


def handle(conn):
    with conn:
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                return
            data += chunk
        target = data.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
        status, body = answer(urlsplit(target)._replace(scheme="", netloc="").geturl() or "/")
        head = f"HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\n"
        head += "Connection: close\r\n\r\n"
        conn.sendall(head.encode("latin-1") + body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port_file")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(args.timeout)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.replace(args.port_file + ".tmp", args.port_file)
    threading.Timer(args.timeout, lambda: os._exit(0)).start()
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            break
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
