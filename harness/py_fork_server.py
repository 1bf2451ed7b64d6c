"""minrepro's Python fork server (see engine/executors/fork_server.h).

Started by minrepro as
`python [-u] py_fork_server.py --script-dir D [--preload M]... [--native-hooks SO] [--no-standby]`
with the trials' interpreter, flags and environment and its socket on fd 3
(wire format: core/process/fork_protocol.h). The parent imports torch and the
preloaded modules once, never runs a torch op and never initialises CUDA (a
CUDA context does not survive fork), then forks one child per trial, ahead
of it: while a trial runs, the next trial's child is forked and waits (the
standby, see standby_child). The child becomes the trial -- own process
group, stdin from /dev/null, stdout/stderr to the trial's files, the trial's
environment, directory and limits -- and runs the script as __main__ the way
`python [-u] S ARGS` would, ending the way that would: the same exit status,
traceback or signal.
"""
import atexit
import gc
import os
import resource
import runpy
import select
import signal
import socket
import struct
import sys

SOCK = 3


# ---------------------------------------------------------------- wire format

def _read_exact(n, fd):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def receive(fd=SOCK):
    """One message as a list of (key, value) str pairs; None when the client is gone."""
    head = _read_exact(4, fd)
    if head is None:
        return None
    fields = []
    for _ in range(struct.unpack("<I", head)[0]):
        size = _read_exact(4, fd)
        data = _read_exact(struct.unpack("<I", size)[0], fd) if size is not None else None
        if data is None:
            return None
        fields.append(os.fsdecode(data))
    return list(zip(fields[0::2], fields[1::2]))


def encode(pairs):
    out = [struct.pack("<I", 2 * len(pairs))]
    for key, value in pairs:
        for text in (key, value):
            data = os.fsencode(text)
            out += [struct.pack("<I", len(data)), data]
    return b"".join(out)


def send(pairs):
    data = encode(pairs)
    try:
        while data:
            data = data[os.write(SOCK, data):]
    except OSError:
        raise SystemExit(0)  # the client is gone: so is the server


def values(message, key):
    return [v for k, v in message if k == key]


# ---------------------------------------------------------------- the child

def open_files(message):
    """The trial's stdin, stdout and stderr, opened by the parent so that a bad
    path is reported as an error instead of a child that dies unexplained."""
    fds = []
    try:
        fds.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        for key in ("stdout", "stderr"):
            fds.append(os.open(values(message, key)[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))
    except OSError:
        _close_all(fds)
        raise
    return fds


def _close_all(fds):
    for fd in fds:
        os.close(fd)


def _redirect(fds):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # dup2 clears close-on-exec on 0, 1, 2
    _close_all(fds)


def _set_environment(message):
    os.environ.clear()
    for entry in values(message, "env"):
        name, _, value = entry.partition("=")
        if name:
            os.environ[name] = value
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # re-read TMPDIR, as a fresh process does


def _set_limits(message):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = int(values(message, "as_limit")[0] or 0)
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# torch's default generator as a fresh process has it right after `import
# torch`: a fixed seed in most builds, one drawn from the OS in some (Debian's
# 1.13). initial_seed() is the seed, whatever was drawn since.
_torch_fresh_seed = None
_torch_fixed_default_seed = 67280421310721


def _record_torch_seed():
    global _torch_fresh_seed
    if "torch" in sys.modules and _torch_fresh_seed is None:
        _torch_fresh_seed = sys.modules["torch"].initial_seed()


def _reseed():
    """Generators a fresh interpreter seeds from the OS must not repeat the
    parent's state, and torch's generator starts where a fresh process's
    does, whatever a preloaded module drew from it in the server."""
    if "random" in sys.modules:
        sys.modules["random"].seed()
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    if "torch" in sys.modules and _torch_fresh_seed is not None:
        torch = sys.modules["torch"]
        if _torch_fresh_seed == _torch_fixed_default_seed:
            torch.manual_seed(_torch_fresh_seed)
        else:
            torch.seed()


def _script_traceback(tb, script):
    """The traceback from the script's first frame on: runpy and this server are not part of it."""
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    return tb


def _exit_status(exc):
    """What the interpreter makes of an uncaught SystemExit."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def _finalize(status):
    """Interpreter shutdown: wait for threads, run atexit, flush the streams (120 if that fails)."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except Exception:
            pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = status or 120
    return status


def run_script(argv):
    """Runs argv[0] as __main__ with sys.argv = argv; returns its exit status."""
    script = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.realpath(script))  # what `python script.py` puts first
    interrupted = False
    try:
        runpy.run_path(script, run_name="__main__")
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException as exc:  # what the interpreter prints for an uncaught exception
        exc.__traceback__ = _script_traceback(exc.__traceback__, script)  # 3.11 prints this one
        sys.excepthook(type(exc), exc, exc.__traceback__)
        interrupted = isinstance(exc, KeyboardInterrupt)
        status = 1
    status = _finalize(status)
    if interrupted:  # Python 3.8+ dies of SIGINT after an uncaught KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status


# harness/py_hooks.cc, when the client passed it (--native-hooks).
_skip_cpp_stack_traces = None


def prepare_child():
    """What every child does first, whatever its trial."""
    os.setpgid(0, 0)
    _die_with_server()
    os.close(SOCK)  # a grandchild holding it would hide the client's exit from the parent
    _reseed()


# The server that forks the next child (a clone's own, in a clone): set in _fork.
_forking_server = None


def _die_with_server():
    """A trial whose server dies under it (the OOM killer, a trial that kills
    it) dies with it: only the server knew its pid, and the client runs the
    trial again in a new server. Before, such a trial paused or hanging ran
    on, reparented to init, after every run had ended."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        return
    if _forking_server is not None and os.getppid() != _forking_server:
        os._exit(70)  # it died between the fork and the prctl


def _adopt_orphans():
    """Descendants that leave the trial's group are reparented to the trial,
    not to minrepro, while it runs: forked ones carry no tag that minrepro
    could find them by (core/process/containment.h)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass


def _end_descendants():
    """Kills and reaps every child still there when the trial ends (orphans
    reparented to it included), as a plain process's group and orphans are
    killed when it exits; repeats for the children those leave."""
    while True:
        pids = set()
        for task in os.listdir("/proc/self/task"):
            try:
                with open("/proc/self/task/%s/children" % task) as f:
                    pids.update(int(pid) for pid in f.read().split())
            except OSError:
                pass
        if not pids:
            return
        for pid in pids:
            for target in (pid, -pid):  # and its group, when it made one
                try:
                    os.kill(target, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


# ------------------------------------------------------------ thread pools

# The variables that size the thread pools libraries start at load.
_POOL_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_fresh_threads = None  # torch.get_num_threads() of a fresh process, when the server pinned the pools


def _probe_fresh_threads():
    """Forks, before the server imports anything, a child that imports torch
    as a fresh process would and reports its intra-op thread count; the pid
    and the pipe's read end, or None. It runs while the server preloads."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.close(SOCK)  # the client sees the server's end of file, not this child's
        try:
            import torch
            os.write(write_end, str(torch.get_num_threads()).encode())
        except BaseException:
            pass
        os._exit(0)
    os.close(write_end)
    return pid, read_end


def _read_fresh_threads(probe):
    global _fresh_threads
    if probe is None:
        return
    pid, read_end = probe
    with os.fdopen(read_end, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    _fresh_threads = int(text) if text.isdigit() and "torch" in sys.modules else None


def _restore_threads():
    """The child gets torch's intra-op thread count of a fresh process back
    (the server pinned the pools to 1; the probe imported torch with the
    trials' environment, so its count is the fresh one whatever that says)."""
    if _fresh_threads is not None:
        sys.modules["torch"].set_num_threads(_fresh_threads)


def become_trial(message, fds):
    """The prepared child becomes the trial and runs it; returns its exit status."""
    _redirect(fds)
    os.chdir(values(message, "dir")[0])
    _set_environment(message)
    _restore_threads()
    if _skip_cpp_stack_traces is not None and os.environ.get("TORCH_SHOW_CPP_STACKTRACES") != "1":
        _skip_cpp_stack_traces()  # torch prints that stack only when the variable is 1
    _set_limits(message)
    _adopt_orphans()
    status = run_script(values(message, "arg"))
    _end_descendants()
    return status


def standby_child(channel):
    """A child forked ahead of its trial, while the previous trial runs: it
    waits on its channel for the request and the trial's stdin, stdout and
    stderr, so that the fork (the parent's page tables: up to 25 ms on a loaded VM) and
    prepare_child are off the trial's path. It ran nothing but prepare_child:
    still a fresh process that no other trial ran in. Ends quietly (0) when
    the channel closes unused."""
    prepare_child()
    message = receive(channel.fileno())
    if message is None:
        return 0
    try:
        _, fds, _, _ = socket.recv_fds(channel, 1, 3)
        # Taken: only now may the server report the trial started; without
        # this byte it forks the trial itself, and this child ends having run nothing.
        taken = len(fds) == 3 and channel.send(b"k") == 1
    except OSError:
        taken = False
    channel.close()
    if not taken:
        return 0
    return become_trial(message, fds)


# ---------------------------------------------------------------- the parent

def _await(pid):
    """Blocks until the child ends; if the client goes away first, kills its group and exits."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(SOCK, select.POLLIN)
    try:
        while True:
            ready = dict(poller.poll())
            if SOCK in ready:
                _kill_group(pid)
                os.waitpid(pid, 0)
                os._exit(0)
            if pidfd in ready:
                return
    finally:
        os.close(pidfd)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def reap(pid):
    """The raw wait status, after killing what the child left in its group
    (while the unreaped child still holds the group id)."""
    _await(pid)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    _kill_group(pid)
    return os.waitpid(pid, 0)[1]


def _fork(run):
    """Forks a child that runs run() and exits with its status."""
    global _forking_server
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing buffered may be duplicated into the child
    _forking_server = os.getpid()
    pid = os.fork()
    if pid == 0:
        status = 70  # only if the server's own code failed in the child
        try:
            status = run()
        finally:
            os._exit(status)
    try:
        os.setpgid(pid, pid)  # also here, so the group exists before the client may signal it
    except OSError:
        pass
    return pid


# (pid, our end of its channel) of the standby child, or None.
_standby = None
_standby_wanted = True  # False with --no-standby: each trial forks on demand


def fork_standby():
    global _standby
    if not _standby_wanted or not hasattr(socket, "send_fds"):  # Python < 3.9: trials fork on demand
        return
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return  # out of descriptors, say: trials fork on demand

    def run():
        ours.close()
        return standby_child(theirs)
    try:
        pid = _fork(run)
    except OSError:
        ours.close()
        return
    finally:
        theirs.close()
    _standby = (pid, ours)


def drop_standby():
    """Kills and reaps the standby (it could not take its trial) and forgets it."""
    global _standby
    if _standby is None:
        return
    pid, channel = _standby
    _standby = None
    channel.close()
    _kill_group(pid)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def hand_over(channel, message, fds):
    """Gives the standby the request and the trial's files; True once it says
    it has them (a byte back), so that a standby that died or failed is never
    reported as the trial."""
    try:
        channel.sendall(encode(message))
        socket.send_fds(channel, [b"F"], fds)
        channel.settimeout(30)
        return channel.recv(1) == b"k"
    except OSError:
        return False


def start_child(message, fds):
    """The trial's process and whether it is the standby: the standby when it
    takes the request, else a fork now."""
    global _standby
    if _standby is not None:
        pid, channel = _standby
        if hand_over(channel, message, fds):
            _standby = None
            channel.close()
            return pid, True
        drop_standby()  # it died: fork as before

    def run():
        prepare_child()
        return become_trial(message, fds)
    return _fork(run), False


def serve_one(message):
    try:
        fds = open_files(message)
    except OSError as exc:
        send([("error", "cannot open the trial's output files: %s" % exc.strerror)])
        return
    try:
        pid, from_standby = start_child(message, fds)
    except OSError as exc:
        send([("error", "fork failed: %s" % exc.strerror)])
        return
    finally:
        _close_all(fds)
    try:
        send([("started", str(pid)), ("standby", "1" if from_standby else "0")])
    except SystemExit:
        _kill_group(pid)
        os.waitpid(pid, 0)
        raise
    fork_standby()  # the next trial's process, made while this one runs
    send([("exited", str(reap(pid)))])


def serve_clone():
    """A copy of this server for another job slot, made by fork: milliseconds
    instead of a second `import torch`. Returns True in the copy, which then
    serves on its own socket (passed to the client); False here. The copy is
    a grandchild whose parent exits at once: nobody here has to reap it."""
    if not hasattr(socket, "send_fds"):  # Python < 3.9
        send([("error", "cloning needs Python 3.9 or later")])
        return False
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing buffered may be duplicated into the copy
    global _standby
    middle = os.fork()
    if middle == 0:
        try:
            if os.fork() != 0:
                os._exit(0)
        except OSError:
            os._exit(0)  # the socket's end of file tells the client
        os.setpgid(0, 0)
        os.dup2(theirs.fileno(), SOCK)  # replaces our end of the original's socket
        if _standby is not None:
            _standby[1].close()  # the original's child, not ours
            _standby = None
        ours.close()
        theirs.close()
        return True
    theirs.close()
    os.waitpid(middle, 0)
    send([("cloned", "1")])
    channel = socket.socket(fileno=os.dup(SOCK))
    try:
        socket.send_fds(channel, [b"F"], [ours.fileno()])
    except OSError:
        raise SystemExit(0)  # the client is gone: so is the server
    finally:
        channel.close()
        ours.close()
    return False


def send_ready():
    send([("ready", str(os.getpid())), ("threads", str(len(os.listdir("/proc/self/task")))),
          ("cuda", "1" if cuda_initialized() else "0")])


def parse_args(args):
    global _standby_wanted
    script_dir, preload, hooks = None, [], None
    args = list(args)
    while args:
        flag = args.pop(0)
        if flag == "--no-standby":
            _standby_wanted = False
            continue
        value = args.pop(0) if args else None
        if flag == "--script-dir":
            script_dir = value
        elif flag == "--preload":
            preload.append(value)
        elif flag == "--native-hooks":
            hooks = value
    return script_dir, preload, hooks


def load_hooks(path):
    """The native hooks, only once torch (and so the c10 they link) is loaded."""
    global _skip_cpp_stack_traces
    if path is None or "torch" not in sys.modules:
        return
    import ctypes
    try:
        _skip_cpp_stack_traces = ctypes.CDLL(path).minrepro_skip_cpp_stack_traces
    except (OSError, AttributeError) as exc:  # children then run exactly as without
        print("minrepro: native hooks not used: %s" % exc, file=sys.stderr)


def cuda_initialized():
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _warm_imports():
    """What most training steps import on their own after torch, imported
    once here: PyTorch 2.x's optimizers import torch._dynamo (and sympy,
    about 800 modules: 0.9 s here) when the step builds one, which every
    child would otherwise pay again. It starts no thread. Skipped where it
    does not exist (1.x) or fails to import."""
    torch = sys.modules.get("torch")
    if torch is None or torch.__version__.split(".")[0] in ("0", "1"):
        return
    try:
        import torch._dynamo  # noqa: F401
    except Exception:
        pass


def main():
    script_dir, preload, hooks = parse_args(sys.argv[1:])
    # Imports resolve as the scripts' would: their directory first on sys.path.
    sys.path[0] = os.path.realpath(script_dir)
    # Thread pools started at import would make the server unsafe to fork
    # (send_ready counts threads): numpy's OpenBLAS, which torch 2.x
    # imports, starts one per core; a preloaded module that runs a parallel
    # op at import (torch.linalg.qr of a random matrix) starts OpenMP's or
    # MKL's. The server imports with these pools at one thread, unless the
    # trials' environment sizes them, and each child then sets torch's
    # intra-op threads to what a fresh process has (_probe_fresh_threads).
    # OpenBLAS's count is fixed at load: children run numpy's BLAS on one
    # thread where a fresh process would use several, a difference the
    # check of forked against fresh trials (engine/plain_process_check.h) would show.
    pinned = [name for name in _POOL_VARIABLES if name not in os.environ]
    probe = _probe_fresh_threads() if pinned else None
    for name in pinned:
        os.environ[name] = "1"
    for name in preload:
        __import__(name)
        _record_torch_seed()  # once, at the import that brought torch in, before a later module reseeds it
    _warm_imports()
    for name in pinned:
        del os.environ[name]
    _read_fresh_threads(probe)
    load_hooks(hooks)
    gc.collect()
    gc.freeze()  # children then copy fewer pages when they touch the parent's objects
    send_ready()
    fork_standby()
    while True:
        message = receive()
        if message is None:
            return
        if values(message, "op") == ["clone"]:
            if serve_clone():
                send_ready()  # the copy's first words, on its own socket
                fork_standby()
            continue
        if values(message, "op") != ["run"]:
            return
        serve_one(message)


if __name__ == "__main__":
    main()
    # The client is gone and nothing here needs finalising: skipping the
    # interpreter's teardown of torch (about a second) lets minrepro end at once.
    os._exit(0)
