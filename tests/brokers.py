"""A real ``redis-server`` for the tests of the shared frontier.

Each server runs in its own directory on a unix socket (no port to
clash), with the append-only file on, and is stopped by its PID. Where
no ``redis-server`` is installed the tests that need one are skipped with
the command that installs it, except under ``CI=true``, where a missing
server fails the run (so a CI image without it cannot pass silently).

Nothing runs at import (pytest imports this module for doctests).
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

INSTALL = "apt-get install redis-server"


def redis_server_binary():
    """Path of redis-server: ``LINKRANK_TEST_REDIS_SERVER``, else the one on PATH, else None."""
    return os.environ.get("LINKRANK_TEST_REDIS_SERVER") or shutil.which("redis-server")


def require_redis_server():
    """The binary, or skip (fail under CI=true) with the install command."""
    binary = redis_server_binary()
    if binary is None:
        message = f"redis-server not installed: {INSTALL} (or make test as root)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


class RedisServer:
    """``redis-server`` on ``<workdir>/redis.sock`` with its data in ``workdir`` (AOF on)."""

    def __init__(self, workdir, binary=None):
        self.binary = binary or require_redis_server()
        self.dir = str(workdir)
        os.makedirs(self.dir, exist_ok=True)
        # A short directory: unix socket paths are limited to ~100 bytes.
        self.socket = os.path.join(tempfile.mkdtemp(prefix="lr-redis-"), "redis.sock")
        self.url = f"unix://{self.socket}?db=0"
        self.proc = None
        self.start()

    def start(self, timeout=10):
        """Start (again) on the same directory: it loads its append-only file if there is one."""
        os.makedirs(os.path.dirname(self.socket), exist_ok=True)
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        self.proc = subprocess.Popen(
            [self.binary, "--port", "0", "--unixsocket", self.socket, "--unixsocketperm", "700", "--dir", self.dir,
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
             "--loglevel", "warning", "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        import redis

        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                if os.path.exists(self.socket) and redis.Redis(unix_socket_path=self.socket).ping():
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)

    def kill9(self):
        """SIGKILL: what it acknowledged is in the append-only file (at most the last second is not)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def wipe(self):
        """Stop it and delete its data: the next :meth:`start` is an empty broker."""
        self.kill9()
        for name in os.listdir(self.dir):
            if name.startswith(("appendonly", "dump")):
                path = os.path.join(self.dir, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()
        # The socket's directory is made again by the next start.
        shutil.rmtree(os.path.dirname(self.socket), ignore_errors=True)
