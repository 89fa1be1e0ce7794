"""`ember serve` as a child process for the Python server tests."""
import re
import subprocess
import threading
import time


def start_serve(ember, folder, args=(), timeout=300):
    """Starts `ember serve -m folder --port 0 *args`; returns (process, base URL, the lines it printed
    before listening). Later stderr is drained in the background so the pipe never fills."""
    proc = subprocess.Popen([ember, "serve", "-m", str(folder), "--port", "0", *args], stderr=subprocess.PIPE, text=True)
    lines, deadline = [], time.time() + timeout
    while True:
        assert time.time() < deadline, "ember serve did not start: " + "".join(lines)
        line = proc.stderr.readline()
        assert line, f"ember serve exited ({proc.wait()}): " + "".join(lines)
        lines.append(line)
        m = re.match(r"ember serve: (http://\S+/)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, m.group(1), lines


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
