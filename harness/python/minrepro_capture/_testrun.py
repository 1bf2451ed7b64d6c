"""Capture runs the case it wrote once, as minrepro's first trial will.

A fresh process, in an empty directory of its own, with the environment
minrepro gives trials (MINREPRO_SEED and PYTHONHASHSEED 0): when it does
not fail with the captured exception and message, the user hears it now,
at the failure, with the likely causes, not hours later as shrink's exit 3."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*): ?(.*)$")


class TestRun:
    def __init__(self, verdict, detail, seconds):
        self.verdict = verdict   # "same", "different", "passed", "timeout" or "not-run"
        self.detail = detail     # what the run ended with
        self.seconds = seconds

    @property
    def same(self):
        return self.verdict == "same"


def last_exception(stderr):
    """(type name without its module, first message line) of the last exception Python printed."""
    found = None
    for line in stderr.splitlines():
        match = _EXCEPTION_LINE.match(line)
        if match and (match.group(1).endswith(("Error", "Exception", "Interrupt", "Exit")) or "." in match.group(1)):
            found = (match.group(1).rsplit(".", 1)[-1], match.group(2).strip())
    return found


def run(argv, case_dir, timeout, exception_name, message):
    argv = [a.replace("{case_dir}", case_dir).replace("{batch}", os.path.join(case_dir, "batch.pt")) for a in argv]
    work = tempfile.mkdtemp(prefix="minrepro-capture-test-")
    env = dict(os.environ, MINREPRO_SEED="0", PYTHONHASHSEED="0", TMPDIR=work)
    start = time.monotonic()
    process = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return TestRun("timeout", "still running after %s s" % timeout, time.monotonic() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - start
    if process.returncode == 0:
        return TestRun("passed", "exit status 0", seconds)
    seen = last_exception(stderr)
    if seen == (exception_name, message):
        return TestRun("same", "%s: %s" % seen, seconds)
    if seen is None:
        tail = [line for line in stderr.splitlines() if line.strip()][-1:] or ["no output"]
        return TestRun("different", "exit status %d (%s)" % (process.returncode, tail[0][:200]), seconds)
    return TestRun("different", "%s: %s" % seen, seconds)
