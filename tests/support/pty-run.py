"""pty-run.py COMMAND...: runs COMMAND with its standard output and error on
a pseudo-terminal (as in a terminal window; standard input is /dev/null),
and prints all it wrote with '\\r' as <CR> and the erase-line sequence
ESC[K as <EL>, so that FileCheck can see a progress line rewritten in place.
Exits with COMMAND's status."""

import os
import pty
import subprocess
import sys

master, slave = pty.openpty()
proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
os.close(slave)
data = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: every writer closed the terminal
        break
    if not chunk:
        break
    data += chunk
os.close(master)
rc = proc.wait()
# The terminal turns "\n" into "\r\n"; keep the '\r's the program wrote.
text = data.decode("utf-8", "replace").replace("\r\n", "\n")
sys.stdout.write(text.replace("\r", "<CR>").replace("\033[K", "<EL>"))
sys.exit(rc)
