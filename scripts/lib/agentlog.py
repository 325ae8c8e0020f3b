"""The daemon benchmarks' reader of `heartbeat-agent daemon --log-format json` (bench-daemon.sh,
bench-cluster.sh): a daemon started with its JSON log on a pipe that a thread reads line by
line, handing each event to the script's own `on_event` under a lock, keeping the WARN and
ERROR lines nobody took (the first three are printed when it stops), its resident and private
size (now, and at start and running for jobs every 5 s), the config of N jobs `echo ok` the
memory benchmarks give it (bench-daemon-pair.sh, bench-builds.sh), a daemon of N jobs due at
one second with its log in a file (bench-burst.sh, bench-pings.sh) and its CPU, and the
percentile helper the scripts report with. The embedded Python of each script imports it through
`sys.path` (the scripts run from the repository's root).
"""
import json
import os
from datetime import datetime, timedelta, timezone
import signal
import subprocess
import threading
import time


class Daemon:
    """A `heartbeat-agent daemon` on `config`, started through `prefix` (such as `nice -n N`).

    A subclass sets its own counters before calling `__init__` (the reading thread starts
    there) and overrides `on_event`; `label` names it in the warnings printed at `stop`.
    """

    label = "daemon"
    # WARN and ERROR lines holding one of these are expected, not warnings worth printing.
    expected = ()

    def __init__(self, binary, config, prefix=()):
        self.proc = subprocess.Popen(
            list(prefix) + [binary, "daemon", "--log-format", "json", "--config", config],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.other = []
        self.lock = threading.Lock()
        threading.Thread(target=self.read, daemon=True).start()

    def on_event(self, event):
        """Takes one parsed log line (under the lock); True when it was the subclass's."""
        return False

    def read(self):
        for line in self.proc.stderr:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if self.on_event(event):
                    continue
                if event.get("level") in ("WARN", "ERROR") and not any(e in line for e in self.expected):
                    self.other.append(line.strip())

    def wait(self, pred, timeout):
        """Whether `pred(self)` (called under the lock) held within `timeout` seconds."""
        end = time.time() + timeout
        while time.time() < end:
            with self.lock:
                if pred(self):
                    return True
            time.sleep(0.05)
        return False

    def rss_kib(self):
        """The daemon's resident size now (VmRSS, KiB)."""
        return self.status_kib("VmRSS")

    def status_kib(self, field):
        """A size of /proc/PID/status now, in KiB: VmRSS, RssAnon (private: heap, stacks,
        relocated data), RssFile."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

    def running_rss(self, jobs, fires=6):
        """For a daemon of `jobs` jobs due every 5 s that has just started, counting `finished`
        runs: VmRSS (KiB) 1 s after start; the largest VmRSS sampled every 0.25 s over the 5 s
        after the jobs' `fires`-th run; and whether every run came within 45 s."""
        time.sleep(1)
        start = self.rss_kib()
        ok = self.wait(lambda d: d.finished >= fires * jobs, 45)
        end, peak = time.time() + 5, 0
        while time.time() < end:
            peak = max(peak, self.rss_kib())
            time.sleep(0.25)
        return start, peak, ok

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        for line in self.other[:3]:
            print(f"   {self.label} warning:", line[:200])


class Runs(Daemon):
    """A daemon whose `job started` lines (and their `delay_ms`) and `job finished` lines are
    counted: the spawn benchmarks' reader (bench-daemon.sh, bench-history.sh)."""

    def __init__(self, binary, config, prefix=()):
        self.started, self.finished, self.delays = 0, 0, []
        super().__init__(binary, config, prefix)

    def on_event(self, event):
        msg = event.get("message", "")
        if msg == "job started":
            self.started += 1
            self.delays.append(event["delay_ms"])
        elif msg == "job finished":
            self.finished += 1
        else:
            return False
        return True


def echo_jobs_config(directory, n, every5):
    """Writes DIRECTORY/config.toml (DIRECTORY new) of `n` jobs `echo ok` and returns its path:
    every 5 s (`*/5` in the seconds field) when `every5`, else each due once, spread over the
    seconds after a start delay (a second per 400 jobs more than 4 s)."""
    os.makedirs(directory)
    spread = max(2, n // 500)
    base = datetime.now(timezone.utc) + timedelta(seconds=4 + n // 400)
    path = os.path.join(directory, "config.toml")
    with open(path, "w") as f:
        f.write(f'[status]\nlisten = "{directory}/status.sock"\n\n[agent]\nstate_dir = "{directory}/state"\nshutdown_timeout = "5s"\n\n')
        for i in range(n):
            t = base + timedelta(seconds=(i * spread) // n)
            schedule = "*/5 * * * * *" if every5 else f"{t.second} {t.minute} {t.hour} * * *"
            f.write(f'[[jobs]]\nname = "job-{i:05d}"\nschedule = "{schedule}"\n'
                    f'command = ["echo", "ok"]\n\n')
    return path


class EchoJobs(Runs):
    """A daemon of `echo_jobs_config`'s jobs, which ping nothing (that warning is expected)."""

    expected = ("nothing will be pinged",)


def start_due_jobs(binary, directory, n, due, job, head=""):
    """Starts `binary daemon --log-format json` on DIRECTORY/config.toml (written here; its log
    in DIRECTORY/log) of `n` jobs all due at the wall-clock second `due`, job `i`'s TOML lines
    after its name and schedule being `job(i)` and `head` the config's tables after [status]
    and [agent]; returns the process."""
    at = datetime.fromtimestamp(due)  # the daemon's schedules are in local time
    config = os.path.join(directory, "config.toml")
    with open(config, "w") as f:
        f.write(f'[status]\nlisten = "{directory}/status.sock"\n\n[agent]\n'
                f'state_dir = "{directory}/state"\nshutdown_timeout = "5s"\n\n{head}')
        for i in range(n):
            f.write(f'[[jobs]]\nname = "job-{i:05d}"\nschedule = "{at.second} {at.minute} {at.hour} * * *"\n'
                    f'{job(i)}\n')
    with open(os.path.join(directory, "log"), "w") as log:
        return subprocess.Popen([binary, "daemon", "--log-format", "json", "--config", config],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)


def cpu_seconds(pid):
    """The CPU (utime + stime, in seconds) process `pid` has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values, p):
    """The p-th percentile of `values`: the sorted value at index int(n * p / 100), NaN when empty."""
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")
