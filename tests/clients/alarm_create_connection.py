"""alarm_create_connection.py - a program's alarm around its connect.

A SIGALRM handler (Python's: without SA_RESTART) and a one-shot timer of MS
milliseconds, then socket.create_connection to 127.0.0.1:PORT and GET /f.
CPython (PEP 475) meets a connect cut by a signal as POSIX says: the
connection goes on, so it waits for POLLOUT and reads SO_ERROR.  Prints
the status line, or the exception.

Usage: alarm_create_connection.py PORT MS
"""
import signal
import socket
import sys

alarms = 0


def on_alarm(sig, frame):
    global alarms
    alarms += 1


signal.signal(signal.SIGALRM, on_alarm)
port, ms = int(sys.argv[1]), int(sys.argv[2])
signal.setitimer(signal.ITIMER_REAL, ms / 1000.0)
try:
    s = socket.create_connection(("127.0.0.1", port))
    # the alarm's part is over: alone a late one changes nothing either
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    s.sendall(b"GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    print(got.split(b"\r\n", 1)[0].decode())
except OSError as e:
    print("error", type(e).__name__, e.errno)
